#!/usr/bin/env bash
# The real stack catches the mutants that matter: each mutant below is
# applied to a scratch copy of this tree, the end-to-end tests that should
# catch it run against the real kube-apiserver (and, where the test needs
# them, the real cilium-operator and agents on Cilium's allocator), and the
# script fails if any mutant survives. The unmutated copy runs the same
# tests first: a test that fails without a mutant proves nothing.
#
#   tests/mutants/real.sh            # every mutant
#   tests/mutants/real.sh 2 5        # some, by number
#
# Needs what the e2e suite needs (docs/development.md). The scratch copy and
# its target directory live under target/mutants-real (never this
# checkout's target: a mutant built there would replace the real engine).
# Prints one line per mutant and a summary; exit 1 if any survived.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
base=$root/target/mutants-real
tree=$base/tree
export CARGO_TARGET_DIR=$base/target
export CI="${CI:-true}"
started=$(date +%s)

# number | what | file | perl substitution (-0 mode) | e2e test filters
mutants=(
  "1|the delete sent without its {uid, resourceVersion} preconditions|crates/cilium-gc/src/sweep/mod.rs|s/\"preconditions\": \{\"uid\": ident\.uid, \"resourceVersion\": ident\.resource_version\},\n//|marked_in_use scale::delete_as"
  "2|if refs > 0 -> if false in policy.rs|crates/cilium-gc-cluster/src/policy.rs|s/if refs > 0 \{/if false {/|marked_in_use scale::delete_as"
  "3|an unmarked identity decided Stale instead of Unmarked|crates/cilium-gc-cluster/src/policy.rs|s/return verdict\(Reason::Unmarked\);/return verdict(Reason::Stale);/|marked_in_use scale::delete_as"
  "4|a wait of 20 s before the first delete|crates/cilium-gc/src/sweep/mod.rs|s/(\) -> Vec<ItemResult> \{\n)/\$1    tokio::time::sleep(std::time::Duration::from_secs(20)).await;\n/|scale::deletes_begin"
  "5|every 409 treated as already gone|crates/cilium-gc-cluster/src/retry.rs|s/409 => Class::Conflict,/409 => Class::NotFound,/|conflicts::"
)
wanted=("$@")

copy() {
  rm -rf "$tree"
  mkdir -p "$tree"
  git ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$tree")
}

# run FILTERS...: the e2e tests matching every filter, in the scratch copy.
run() {
  (cd "$tree" && cargo test -q --test e2e -- "$@") >"$base/last.log" 2>&1
}

mkdir -p "$base"
echo "# tests/mutants/real.sh on $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
copy
all_filters=$(printf '%s\n' "${mutants[@]}" | cut -d'|' -f5 | tr ' ' '\n' | sort -u | tr '\n' ' ')
# shellcheck disable=SC2086
if ! run $all_filters; then
  echo "baseline: the unmutated copy fails its tests ($all_filters); see $base/last.log" >&2
  tail -30 "$base/last.log" >&2
  exit 2
fi
echo "baseline: unmutated, passed: $all_filters"

survived=0 caught=0
for m in "${mutants[@]}"; do
  IFS='|' read -r n what file subst filters <<<"$m"
  if [ ${#wanted[@]} -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx "$n"; then
    continue
  fi
  copy
  perl -0pi -e "$subst" "$tree/$file"
  if cmp -s "$root/$file" "$tree/$file"; then
    echo "mutant $n ($what): the substitution no longer applies to $file" >&2
    exit 2
  fi
  t0=$(date +%s)
  # shellcheck disable=SC2086
  if run $filters; then
    echo "mutant $n SURVIVED: $what ($file); tests: $filters"
    survived=$((survived + 1))
  else
    failed=$(grep -E '^    [a-z0-9_:]+$' "$base/last.log" | sed 's/^ *//' | sort -u | tr '\n' ' ' || true)
    if grep -q "error\[E" "$base/last.log"; then
      echo "mutant $n ($what): does not compile; see $base/last.log" >&2
      exit 2
    fi
    echo "mutant $n caught: $what ($file); failed: ${failed:-see log} in $(( $(date +%s) - t0 )) s"
    caught=$((caught + 1))
  fi
done
rm -rf "$tree"
echo "real-stack mutants: $caught caught, $survived survived, in $(( $(date +%s) - started )) s"
[ "$survived" -eq 0 ]
