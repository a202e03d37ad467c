#!/usr/bin/env bash
# Builds the labelsfilter program (./labelsfilter: Cilium's own
# pkg/labelsfilter driven by JSON on stdin) of one Cilium release, with that
# release's go.mod (./v1.15 or ./current), into a cache directory keyed by
# the sources. Separate from build.sh so that the operator's cache is not
# rebuilt for it. Prints the binary's path (the one line on stdout).
#
#   labelsfilter.sh v1.15|current
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
which="${1:-}"
case "$which" in
  v1.15|current) ;;
  *) echo "usage: labelsfilter.sh v1.15|current" >&2; exit 2 ;;
esac
mod="$here/$which"
tags=""
[ "$which" = v1.15 ] && tags="cilium_v1_15"
key=$( (cd "$mod" && cat go.mod go.sum; cat "$here/labelsfilter.sh" "$here"/labelsfilter/*.go) \
  | sha256sum | cut -c1-12)
root="${KCG_CILIUM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-cilium-gc/cilium}"
out="$root/labelsfilter-${which}-${key}"
mkdir -p "$root"
exec 9>"$root/.labelsfilter.lock"
flock 9
if [ -x "$out/bin/labelsfilter" ]; then
  echo "$out/bin/labelsfilter"
  exit 0
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/src/labelsfilter"
cp "$mod/go.mod" "$mod/go.sum" "$out/src/"
cp "$here"/labelsfilter/*.go "$out/src/labelsfilter/"
cd "$out/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -tags "$tags" -o "$out/bin/labelsfilter.tmp" ./labelsfilter >&2
mv "$out/bin/labelsfilter.tmp" "$out/bin/labelsfilter"
echo "$out/bin/labelsfilter"
