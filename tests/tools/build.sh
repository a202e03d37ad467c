#!/usr/bin/env bash
# Builds the real tools the packaging and alerting tests run, from Go modules
# (one small wrapper module each, since their dependency graphs differ):
#   krew/         sigs.k8s.io/krew: krew (as kubectl-krew), validate-krew-manifest
#   pushgateway/  github.com/prometheus/pushgateway
#   promtool/     github.com/prometheus/prometheus/cmd/promtool
# into a cache directory outside the source tree keyed by every go.mod,
# go.sum, tools.go and this script. Reuses a complete cache.
# Prints the cache's bin directory (the one line on stdout); logs go to stderr.
#
#   KCG_TOOLS_CACHE  where caches live (default: $XDG_CACHE_HOME or ~/.cache,
#                    then kubectl-cilium-gc/tools)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

mods=(krew pushgateway promtool)
key=$( (for m in "${mods[@]}"; do cat "$m/go.mod" "$m/go.sum" "$m/tools.go"; done; cat build.sh) | sha256sum | cut -c1-12)
root="${KCG_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-cilium-gc/tools}"
out="$root/tools-$key"
bin="$out/bin"
mkdir -p "$root"
# One build at a time (parallel tests, or two checkouts).
exec 9>"$root/.lock"
flock 9

if [ -f "$out/complete" ]; then
  echo "tools build: cached in $out" >&2
  echo "$bin"
  exit 0
fi

mkdir -p "$bin"
start=$(date +%s)
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

version_of() { # module dir, module path: the version go.mod requires
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1/go.mod"
}
# The version each tool prints: the same -X flags their own release builds set.
prom_ldflags() { # version
  local v="${1#v}"
  echo "-s -w -X github.com/prometheus/common/version.Version=$v -X github.com/prometheus/common/version.BuildDate=$(date -u +%Y%m%d-%H:%M:%S)"
}

krew_v=$(version_of krew sigs.k8s.io/krew)
pg_v=$(version_of pushgateway github.com/prometheus/pushgateway)
prom_v=$(version_of promtool github.com/prometheus/prometheus)
echo "tools build: krew ${krew_v}, pushgateway ${pg_v}, promtool (prometheus ${prom_v})" >&2

(cd krew && go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=${krew_v}" \
  -o "$bin/kubectl-krew" sigs.k8s.io/krew/cmd/krew)
(cd krew && go build -trimpath -ldflags "-s -w" \
  -o "$bin/validate-krew-manifest" sigs.k8s.io/krew/cmd/validate-krew-manifest)
(cd pushgateway && go build -trimpath -ldflags "$(prom_ldflags "$pg_v")" \
  -o "$bin/pushgateway" github.com/prometheus/pushgateway)
# remove_all_sd: promtool checks rules and metrics, it never discovers
# targets; without the cloud SDKs of every service discovery the cold build
# downloads and compiles a fraction of Prometheus (Prometheus' own build tag).
(cd promtool && go build -trimpath -tags remove_all_sd -ldflags "$(prom_ldflags "$prom_v")" \
  -o "$bin/promtool" github.com/prometheus/prometheus/cmd/promtool)

touch "$out/complete"
echo "tools build: done in $(( $(date +%s) - start ))s, $(du -sh "$bin" | cut -f1) in $bin" >&2
echo "$bin"
