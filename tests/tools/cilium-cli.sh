#!/usr/bin/env bash
# Builds the real cilium-cli (`cilium sysdump` writes the archives that
# `diagnose --from` reads) from a cilium-cli source tree, offline, into a
# cache directory outside the source tree. Reuses a complete cache.
#
#   cilium-cli.sh SRC     SRC: a cilium-cli source tree with its vendor/
#                         directory (github.com/cilium/cilium-cli at a tag,
#                         e.g. `git archive v0.19.2`); KCG_CILIUM_CLI_SRC
#                         when SRC is not given
#
# Why not from the Go module proxy like tests/tools/build.sh: the proxy
# refuses github.com/cilium/cilium-cli at every version (403 "This module
# version is not available", its version list too), and Cilium's release
# modules (github.com/cilium/cilium v1.19.3, v1.20.2) do not hold the
# cilium-cli/ directory the CLI is built from (only main's pseudo-versions
# do, and the proxy refuses those: 403). docs/diagnose.md, "A real
# cilium-cli archive". So .ci/run does not build it; the archive the test
# reads is recorded with it (tests/e2e/diagnose_sysdump.rs).
#
# The build uses nothing but SRC (-mod=vendor, GOPROXY=off) and sets the
# version the release builds set (defaults.CLIVersion, from SRC's
# `.cli-version`, else `git describe` of SRC, else "unknown").
# Prints the binary's path (the one line on stdout); logs go to stderr.
#
#   KCG_CILIUM_CLI_CACHE  where caches live (default: $XDG_CACHE_HOME or
#                         ~/.cache, then kubectl-cilium-gc/cilium-cli)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

src="${1:-${KCG_CILIUM_CLI_SRC:-}}"
[ -n "$src" ] || { echo "usage: cilium-cli.sh SRC (or KCG_CILIUM_CLI_SRC): a cilium-cli source tree with vendor/" >&2; exit 2; }
src="$(cd "$src" && pwd)"
[ -f "$src/go.mod" ] && [ -f "$src/vendor/modules.txt" ] && [ -f "$src/cmd/cilium/main.go" ] \
  || { echo "cilium-cli build: $src is not a cilium-cli source tree with vendor/ (go.mod, vendor/modules.txt, cmd/cilium/main.go)" >&2; exit 1; }
grep -q '^module github.com/cilium/cilium-cli$' "$src/go.mod" \
  || { echo "cilium-cli build: $src/go.mod is not github.com/cilium/cilium-cli" >&2; exit 1; }

if [ -f "$src/.cli-version" ]; then
  version=$(cat "$src/.cli-version")
else
  version=$(git -C "$src" describe --tags --always 2>/dev/null || echo unknown)
fi
key=$( (echo "$version"; cat "$src/go.mod" "$src/go.sum" "$src/vendor/modules.txt" "$here/cilium-cli.sh") \
  | sha256sum | cut -c1-12)
root="${KCG_CILIUM_CLI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-cilium-gc/cilium-cli}"
out="$root/${version}-${key}"
mkdir -p "$root"
# One build at a time (parallel tests, two checkouts).
exec 9>"$root/.lock"
flock 9

if [ -x "$out/bin/cilium" ] && [ -f "$out/complete" ]; then
  echo "cilium-cli build: cached in $out" >&2
  echo "$out/bin/cilium"
  exit 0
fi

rm -rf "$out"
mkdir -p "$out/bin"
start=$(date +%s)
echo "cilium-cli build: cilium-cli ${version} from $src (vendored, offline; several minutes cold)" >&2
(
  cd "$src"
  CGO_ENABLED=0 GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local \
    go build -trimpath -gcflags=all=-dwarf=false \
    -ldflags "-s -w -X github.com/cilium/cilium/cilium-cli/defaults.CLIVersion=${version}" \
    -o "$out/bin/cilium" ./cmd/cilium
)
echo "$version" > "$out/version"
touch "$out/complete"
echo "cilium-cli build: done in $(( $(date +%s) - start ))s, $(du -sh "$out/bin/cilium" | cut -f1), in $out" >&2
echo "$out/bin/cilium"
