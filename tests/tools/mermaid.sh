#!/usr/bin/env bash
# Installs the real Mermaid renderer that tests/it/mermaid.rs draws the
# charts of `diagnose -o markdown` with: @mermaid-js/mermaid-cli (mmdc) and
# the puppeteer it drives, at the versions of tests/tools/mermaid/
# package-lock.json, from the npm registry (`npm ci`). Puppeteer downloads
# no browser (PUPPETEER_SKIP_DOWNLOAD, and no install scripts run): it is
# given Debian's chromium (`apt-get install chromium`, as .ci/run does)
# through the puppeteer config this script writes beside it.
# Cached outside the source tree, keyed by the lock file; reuses a complete
# cache. Prints that directory (the one line on stdout): its
# node_modules/.bin/mmdc and puppeteer-config.json. Logs go to stderr.
#
#   KCG_TOOLS_CACHE  where caches live (default: $XDG_CACHE_HOME or ~/.cache,
#                    then kubectl-cilium-gc/tools)
#   CHROMIUM         the browser (default: chromium on PATH)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

chromium="${CHROMIUM:-$(command -v chromium || true)}"
[ -x "$chromium" ] || { echo "chromium not found (apt-get install chromium)" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "npm not found (apt-get install npm)" >&2; exit 1; }

root="${KCG_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-cilium-gc/tools}"
key=$(cat "$here/mermaid/package.json" "$here/mermaid/package-lock.json" | sha256sum | cut -c1-16)
dir="$root/mermaid-$key"
mkdir -p "$root"
# One install at a time (parallel tests, or two checkouts).
exec 9>"$root/.mermaid.lock"
flock 9

if [ ! -e "$dir/.complete" ]; then
  echo "tools: @mermaid-js/mermaid-cli from the npm registry into $dir" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$here/mermaid/package.json" "$here/mermaid/package-lock.json" "$dir/"
  (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  touch "$dir/.complete"
fi
# As root Chromium needs --no-sandbox; without the background-networking
# flags it opens connections a closed network refuses.
cat >"$dir/puppeteer-config.json" <<EOF
{"executablePath":"$chromium","args":["--no-sandbox","--headless","--disable-gpu","--disable-quic","--no-first-run","--disable-background-networking","--disable-component-update","--disable-sync"]}
EOF
echo "$dir"
