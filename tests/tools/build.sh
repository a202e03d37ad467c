#!/usr/bin/env bash
# Builds the real tools the packaging, alerting and image tests run, from Go
# modules (one small wrapper module each, since their dependency graphs differ):
#   krew/         sigs.k8s.io/krew: krew (as kubectl-krew), validate-krew-manifest
#   pushgateway/  github.com/prometheus/pushgateway
#   promtool/     github.com/prometheus/prometheus/cmd/promtool
#   crane/        github.com/google/go-containerregistry/cmd/crane: builds the
#                 release image with no container daemon (.ci/image), and
#                 serves the loopback registry the image tests push to
# Each module is cached on its own, outside the source tree, keyed by its
# go.mod, go.sum, tools.go and build recipe below (so a new or bumped tool
# does not rebuild the others); one directory of links, keyed by all of them,
# puts every binary in one place. Reuses complete caches.
# Prints that bin directory (the one line on stdout); logs go to stderr.
#
#   KCG_TOOLS_CACHE  where caches live (default: $XDG_CACHE_HOME or ~/.cache,
#                    then kubectl-cilium-gc/tools)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

mods=(krew pushgateway promtool crane)
root="${KCG_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-cilium-gc/tools}"
mkdir -p "$root"
# One build at a time (parallel tests, or two checkouts).
exec 9>"$root/.lock"
flock 9

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

version_of() { # module dir, module path: the version go.mod requires
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1/go.mod"
}
# -dwarf=false on every build: as tests/apiserver/build.sh (no DWARF the
# linker would drop).
# The version each tool prints: the same -X flags their own release builds set.
prom_ldflags() { # version
  local v="${1#v}"
  echo "-s -w -X github.com/prometheus/common/version.Version=$v -X github.com/prometheus/common/version.BuildDate=$(date -u +%Y%m%d-%H:%M:%S)"
}

# build_<module> BIN: build that module's tools into BIN (run inside the module).
build_krew() {
  local v; v=$(version_of . sigs.k8s.io/krew)
  echo "tools build: krew ${v}" >&2
  go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=${v}" \
    -o "$1/kubectl-krew" sigs.k8s.io/krew/cmd/krew
  go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" \
    -o "$1/validate-krew-manifest" sigs.k8s.io/krew/cmd/validate-krew-manifest
}
build_pushgateway() {
  local v; v=$(version_of . github.com/prometheus/pushgateway)
  echo "tools build: pushgateway ${v}" >&2
  go build -trimpath -gcflags=all=-dwarf=false -ldflags "$(prom_ldflags "$v")" -o "$1/pushgateway" github.com/prometheus/pushgateway
}
build_promtool() {
  local v; v=$(version_of . github.com/prometheus/prometheus)
  echo "tools build: promtool (prometheus ${v})" >&2
  # remove_all_sd: promtool checks rules and metrics, it never discovers
  # targets; without the cloud SDKs of every service discovery the cold build
  # downloads and compiles a fraction of Prometheus (Prometheus' own build tag).
  go build -trimpath -gcflags=all=-dwarf=false -tags remove_all_sd -ldflags "$(prom_ldflags "$v")" \
    -o "$1/promtool" github.com/prometheus/prometheus/cmd/promtool
}
build_crane() {
  local v; v=$(version_of . github.com/google/go-containerregistry)
  echo "tools build: crane (go-containerregistry ${v})" >&2
  # `crane version` prints the module version, as its release builds do.
  go build -trimpath -gcflags=all=-dwarf=false \
    -ldflags "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=${v}" \
    -o "$1/crane" github.com/google/go-containerregistry/cmd/crane
}

start=$(date +%s)
keys=""
for m in "${mods[@]}"; do
  key=$( (cat "$m/go.mod" "$m/go.sum" "$m/tools.go"; declare -f version_of prom_ldflags "build_$m") \
    | sha256sum | cut -c1-12)
  keys+="$m-$key "
  out="$root/$m-$key"
  [ -f "$out/complete" ] && continue
  rm -rf "$out"
  mkdir -p "$out/bin"
  (cd "$m" && "build_$m" "$out/bin")
  touch "$out/complete"
done

all="$root/tools-$(echo "$keys" | sha256sum | cut -c1-12)"
if [ ! -f "$all/complete" ]; then
  rm -rf "$all"
  mkdir -p "$all/bin"
  for k in $keys; do
    for b in "$root/$k/bin"/*; do ln -s "$b" "$all/bin/"; done
  done
  touch "$all/complete"
  echo "tools build: done in $(( $(date +%s) - start ))s, $(du -shL "$all/bin" | cut -f1) in $all/bin" >&2
else
  echo "tools build: cached in $all" >&2
fi
echo "$all/bin"
