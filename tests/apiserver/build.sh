#!/usr/bin/env bash
# Builds the real kube-apiserver, kubectl (same release) and etcd (the version
# that release requires) of one Kubernetes release from its Go module
# (v1.<minor>/), into a cache directory outside the source tree keyed by the
# versions and that module's go.mod, go.sum and tools.go. Reuses a complete
# cache. Prints the cache directory (the one line on stdout); logs go to stderr.
#
#   build.sh [VERSION]   VERSION: one of versions.env's K8S_VERSIONS
#                        (default: $KCG_K8S_VERSION, else versions.env's
#                        K8S_VERSION)
#   KCG_APISERVER_CACHE  where caches live (default: $XDG_CACHE_HOME or
#                        ~/.cache, then kubectl-cilium-gc/apiserver)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
. ./versions.env
K8S_VERSION="${1:-${KCG_K8S_VERSION:-$K8S_VERSION}}"
die() { echo "apiserver build: $*" >&2; exit 2; }
[[ "$K8S_VERSION" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "not a release: $K8S_VERSION (one of: $K8S_VERSIONS)"
module="v1.${BASH_REMATCH[1]}"
[ -f "$module/go.mod" ] && [ "$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$module/go.mod")" = "$K8S_VERSION" ] \
  || die "no Go module for $K8S_VERSION in tests/apiserver/$module (releases: $K8S_VERSIONS; add one with update-go-mod.sh)"
cd "$module"

etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' go.mod)
key=$( (cat go.mod go.sum tools.go "$here/build.sh") | sha256sum | cut -c1-12)
root="${KCG_APISERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-cilium-gc/apiserver}"
out="$root/k8s-${K8S_VERSION}-etcd-${etcd_version}-${key}"
mkdir -p "$root"
cached() {
  if [ -x "$out/bin/kube-apiserver" ] && [ -x "$out/bin/etcd" ] && [ -x "$out/bin/kubectl" ] && [ -f "$out/complete" ]; then
    echo "apiserver build: cached in $out" >&2
    echo "$out"
    exit 0
  fi
}
# A finished build needs no lock: a test of this release does not wait
# while another release builds (.ci/run builds them beside the tests).
cached
# One build of a release at a time (parallel tests, or two checkouts).
exec 9>"$out.lock"
flock 9
cached

mkdir -p "$out/bin"
start=$(date +%s)
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
# /version reports the real release: the same -X flags Kubernetes' own
# hack/lib/version.sh sets, for the server and the client libraries.
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=${K8S_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor}"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${build_date}"
done

echo "apiserver build: kube-apiserver and kubectl ${K8S_VERSION}, etcd ${etcd_version} (first build takes a while)" >&2
# -dwarf=false: the linker drops DWARF anyway (-w), so the compiler need not
# write it (a tenth of the compile's CPU; the same flag in every build
# script, so packages two builds share are compiled once).
# providerless: Kubernetes' own build tag for a build without the in-tree
# cloud providers (until 1.30 they pulled the GCE, Azure and vSphere SDKs into
# kube-apiserver: 37 % of the 1.28 build's Go source, compiled for nothing the
# suite runs; the current release no longer has them, so it builds the same).
go build -trimpath -gcflags=all=-dwarf=false -tags providerless -ldflags "$ldflags" -o "$out/bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -gcflags=all=-dwarf=false -tags providerless -ldflags "$ldflags" -o "$out/bin/kubectl" k8s.io/kubernetes/cmd/kubectl
go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$out/bin/etcd" go.etcd.io/etcd/server/v3
touch "$out/complete"
echo "apiserver build: done in $(( $(date +%s) - start ))s, $(du -sh "$out/bin" | cut -f1) in $out" >&2
echo "$out"
