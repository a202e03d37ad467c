#!/usr/bin/env bash
# Builds the real cilium-operator-generic and the agents program (../agents,
# Cilium's own identity allocation code driven by our flags) of one Cilium
# release from Go modules, into a cache directory outside the source tree
# keyed by go.mod, go.sum, tools.go, this script and the agents' sources.
# Reuses a complete cache.
#
#   build.sh v1.15      github.com/cilium/cilium v1.15.6 (tests/cilium/v1.15)
#   build.sh current    the current release that builds here (tests/cilium/current)
#
# Prints the cache directory (the one line on stdout); it holds
# bin/cilium-operator-generic, bin/cilium-agents and `version` (the Cilium
# release). Logs go to stderr.
#
#   KCG_CILIUM_CACHE  where caches live (default: $XDG_CACHE_HOME or
#                     ~/.cache, then kubectl-cilium-gc/cilium)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

which="${1:-}"
case "$which" in
  v1.15|current) ;;
  *) echo "usage: build.sh v1.15|current" >&2; exit 2 ;;
esac
mod="$here/$which"
version=$(awk '$1 == "github.com/cilium/cilium" { print $2; exit }
              $1 == "require" && $2 == "github.com/cilium/cilium" { print $3; exit }' "$mod/go.mod")
[ -n "$version" ] || { echo "cilium build: no github.com/cilium/cilium in $mod/go.mod" >&2; exit 1; }
# The agents are compiled against the release's API: cilium_v1_15 selects
# the files for 1.15 (its allocator and backend take no logger).
agent_tags=ipam_provider_operator
[ "$which" = v1.15 ] && agent_tags+=",cilium_v1_15"

key=$( (cd "$mod" && cat go.mod go.sum tools.go; cat "$here/build.sh"; cat "$here"/agents/*.go) \
  | sha256sum | cut -c1-12)
root="${KCG_CILIUM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-cilium-gc/cilium}"
out="$root/${version}-${key}"
mkdir -p "$root"
cached() {
  if [ -x "$out/bin/cilium-operator-generic" ] && [ -x "$out/bin/cilium-agents" ] && [ -f "$out/complete" ]; then
    echo "cilium build: cached in $out" >&2
    echo "$out"
    exit 0
  fi
}
# A finished build needs no lock: a test of one release does not wait
# while the other builds (.ci/run builds them beside the tests).
cached
# One build of a release at a time (parallel tests, two checkouts).
exec 9>"$out.lock"
flock 9
cached

rm -rf "$out"
mkdir -p "$out/bin" "$out/src/agents"
start=$(date +%s)
# The module is built from a copy: the agents (one source tree for every
# release) sit inside it as a package of its own.
cp "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$out/src/"
cp "$here"/agents/*.go "$out/src/agents/"
cd "$out/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

echo "cilium build: cilium-operator-generic ${version} (the first build takes several minutes)" >&2
# -dwarf=false: as tests/apiserver/build.sh (no DWARF the linker would drop).
go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -tags ipam_provider_operator \
  -o "$out/bin/cilium-operator-generic" github.com/cilium/cilium/operator
echo "cilium build: operator in $(( $(date +%s) - start ))s; cilium-agents ${version}" >&2
go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -tags "$agent_tags" -o "$out/bin/cilium-agents" ./agents
echo "$version" > "$out/version"
touch "$out/complete"
echo "cilium build: done in $(( $(date +%s) - start ))s, $(du -sh "$out/bin/cilium-operator-generic" | cut -f1) operator, $(du -sh "$out/bin/cilium-agents" | cut -f1) agents, in $out" >&2
echo "$out"
