#!/usr/bin/env bash
# Mutation testing of the decision core with the real cargo-mutants: every
# mutant of the named files must be caught by the engine's unit tests.
# Fails when any is missed or times out; prints cargo-mutants' summary.
#
#   tests/mutants/core.sh                      # policy.rs (what .ci/run checks)
#   tests/mutants/core.sh crates/cilium-gc-cluster/src/selector.rs ...
#
# The scratch copy cargo-mutants builds has a target directory of its own,
# kept between runs (target/mutants-build): never this checkout's, because
# cargo names a workspace crate's artifacts the same wherever the workspace
# lies, so a mutant built there would replace the checkout's own engine, and
# its fingerprints (file times, relative paths) would let a later build of
# the checkout take it as fresh.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v cargo-mutants >/dev/null 2>&1 || cargo install --locked cargo-mutants --version 27.1.0
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(crates/cilium-gc-cluster/src/policy.rs)
args=()
for f in "${files[@]}"; do args+=(-f "$f"); done
out=${MUTANTS_OUT:-target/mutants}
mkdir -p "$out"
# A first check starts from this checkout's test build, when there is one:
# every dependency's artifacts, not the workspace's own crates (those build
# again in the scratch copy). The engine's dev-dependencies select the
# workspace's features (crates/cilium-gc-cluster/Cargo.toml), so cargo finds
# them fresh; copied, not linked, so nothing built in the scratch directory
# can write into this checkout's.
seed() {
  local from=target/debug to=target/mutants-build/debug d
  [ -d "$from/.fingerprint" ] && [ ! -d "$to/.fingerprint" ] || return 0
  for d in deps build .fingerprint; do
    mkdir -p "$to/$d"
    find "$from/$d" -mindepth 1 -maxdepth 1 \
      ! -name 'cilium_gc*' ! -name 'libcilium_gc*' ! -name 'cilium-gc*' \
      ! -name 'kubectl_cilium_gc*' ! -name 'kubectl-cilium*' ! -name 'it-*' ! -name 'e2e-*' \
      ! -name 'wire-*' ! -name 'schema-*' ! -name 'compare-*' ! -name 'real-*' \
      -exec cp -a -t "$to/$d" {} +
  done
}
seed
# --lib: the engine's unit tests, where the decision core's tests live.
# Incremental: each mutant rebuilds one crate from a one-line change (.ci/run
# turns it off for its own builds, which are built once).
CARGO_INCREMENTAL=1 CARGO_TARGET_DIR="$PWD/target/mutants-build" cargo mutants -p "${MUTANTS_PACKAGE:-cilium-gc-cluster}" "${args[@]}" \
  --timeout 300 -o "$out" -- --lib
