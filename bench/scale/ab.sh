#!/bin/bash
# Two builds of Spools side by side on this machine: the kit's coll.c (built with any
# mpicc_abi) under OLD's and NEW's `spools run`, interleaved run by run, R runs each (each
# run a median of 9 batches); prints the median of each and new over old.
#   OLD=/path/old/spools NEW=target/release/spools PROG=/tmp/coll [R=9] \
#     bash bench/scale/ab.sh RANKS "reduce 8" "gather 8" ...
# (An older build: `git worktree add /tmp/oldwt REV`, built there with its own
# CARGO_TARGET_DIR: `cargo build --release -p spools-cli && make -C crates/spools-mpi`.)
set -u
N=$1; shift
R=${R:-9}
med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
fig() { "$1" run -n "$N" -- "$PROG" "$2" "$3" | awk '{print $4}'; }
for t in "$@"; do
  set -- $t
  o=(); n=()
  for _ in $(seq "$R"); do
    o+=("$(fig "$OLD" "$1" "$2")")
    n+=("$(fig "$NEW" "$1" "$2")")
  done
  mo=$(printf '%s\n' "${o[@]}" | med); mn=$(printf '%s\n' "${n[@]}" | med)
  echo "$1 $2 P=$N old $mo new $mn new/old $(awk -v a="$mn" -v b="$mo" 'BEGIN {printf "%.2f", a / b}')"
done
