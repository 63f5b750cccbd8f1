#!/usr/bin/env bash
# The suite N times in a row (default 10) on a fresh clone of this repository's HEAD, with a
# CPU-heavy process (a busy loop) beside it the whole time: the check that no test passes or
# fails with the machine's load. Run 1 is the whole CI command (`CI=true bash .ci/run`);
# runs 2..N are `cargo test --workspace --locked` and the Python suite
# (`scripts/test-python.sh`) in the same clone. One line per run goes to
# the log (default target/under-load.log), and a failed run's whole output beside it; the
# command exits non-zero if any run failed.
#
#   bash scripts/under-load.sh [RUNS] [LOG]
set -u
cd "$(dirname "$0")/.."
RUNS=${1:-10}
LOG=$(realpath -m "${2:-target/under-load.log}")
REPO=$(pwd)
REV=$(git rev-parse --short HEAD)
DIR=$(mktemp -d /tmp/spools-under-load.XXXXXX)
mkdir -p "$(dirname "$LOG")"
git clone -q "$REPO" "$DIR/repo" && cd "$DIR/repo" && git checkout -q "$REV" || exit 2
sh -c 'while :; do :; done' &
LOAD=$!
trap 'kill $LOAD 2>/dev/null; rm -rf "$DIR"' EXIT
echo "rev $REV, $RUNS runs beside a busy loop (pid $LOAD), start $(date +%T)" > "$LOG"
failed=0
for i in $(seq "$RUNS"); do
  t0=$(date +%s)
  if [ "$i" -eq 1 ]; then CI=true bash .ci/run > "$DIR/run.$i.out" 2>&1; rc=$?
  else { cargo test --workspace --locked && bash scripts/test-python.sh; } > "$DIR/run.$i.out" 2>&1; rc=$?; fi
  passed=$(grep -o '[0-9]* passed' "$DIR/run.$i.out" | awk '{s+=$1} END {print s+0}')
  echo "run $i: rc=$rc passed=$passed $(( $(date +%s) - t0 )) s" >> "$LOG"
  if [ "$rc" -ne 0 ]; then
    failed=1
    grep -E 'FAILED|panicked|^error' "$DIR/run.$i.out" | head -20 >> "$LOG"
    cp "$DIR/run.$i.out" "$LOG.run$i.out" && echo "  whole output: $LOG.run$i.out" >> "$LOG"
  fi
done
cat "$LOG"
exit $failed
