#!/usr/bin/env bash
# Mutation testing of the pure cores (not part of the test command: it takes hours on
# 2 cores). Each target mutates one part of the code (cargo-mutants replaces function
# bodies, operators and constants) and runs the in-process tests of its crate; a mutant
# that no test kills is "missed" and listed in mutants.out/<target>/missed.txt.
#
#   bash scripts/mutants.sh [TARGET ...] [-- EXTRA-CARGO-MUTANTS-ARGS]
#
# Targets: proto (spools-proto, every wire format), matching (the tagged-message matching
# engine), rows (RAID-0/5 row logic), map (spools-map, the mapping algebra: the longest),
# map-core (spools-map's intersect, plan, layout and dist only). Default: proto matching
# rows map-core. Extra arguments go to cargo-mutants (e.g. `--shard 0/4`, `--jobs 2`).
# cargo-mutants is installed (from crates.io, pinned) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# Fewer property-test cases than CI's (each mutant runs the whole test set): enough to
# catch a wrong plan, which fails on most random cases.
export SPOOLS_PROPTEST_CASES="${SPOOLS_PROPTEST_CASES:-32}"

VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q "$VERSION"; then
  cargo install --locked --version "$VERSION" cargo-mutants
fi

targets=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; extra=("$@"); break ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(proto matching rows map-core)

for t in "${targets[@]}"; do
  # Unit and integration tests, not doc tests (each doc test is a separate build) nor
  # the multi-process tests of the crates that have them (minutes per mutant).
  case "$t" in
    proto) args=(-p spools-proto) test=(--lib --tests) ;;
    matching) args=(-f crates/spools-msg/src/protocol/matching.rs) test=(--lib) ;;
    rows) args=(-f crates/spools-io/src/file/rows.rs) test=(--lib --test garbage) ;;
    map) args=(-p spools-map) test=(--lib --tests) ;;
    map-core)
      args=(-f crates/spools-map/src/intersect.rs -f crates/spools-map/src/plan.rs
        -f crates/spools-map/src/layout.rs -f crates/spools-map/src/dist.rs)
      test=(--lib --tests) ;;
    *) echo "unknown target $t (proto, matching, rows, map, map-core)" >&2; exit 2 ;;
  esac
  echo "== cargo mutants: $t"
  mkdir -p "mutants.out/$t"
  # A missed mutant is a finding, not a failure of this script: read missed.txt.
  cargo mutants --no-shuffle --output "mutants.out/$t" "${args[@]}" "${extra[@]}" \
    -- "${test[@]}" || true
  count() { cat "mutants.out/$t/mutants.out/$1.txt" 2>/dev/null | wc -l; }
  echo "   $t: caught $(count caught), missed $(count missed), unviable $(count unviable)," \
    "timeout $(count timeout); missed: mutants.out/$t/mutants.out/missed.txt"
done
