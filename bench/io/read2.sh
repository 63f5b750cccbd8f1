#!/bin/sh
# The 2-rank coll_perf read (512^3 i32, BLOCK on 2x1x1) of two spools binaries and of
# Open MPI's OMPIO and ROMIO, alternating, RUNS times: the seconds of each read.
# Usage: bench/io/read2.sh SPOOLS_BEFORE SPOOLS_AFTER IO_PEER DIR [RUNS]
set -eu
before=$1 after=$2 peer=$3 dir=$4 runs=${5:-5}
layout='i32[512,512,512] block,block,block on 2x1x1'
f=$dir/cp-spools-512
[ -f "$f" ] || "$after" run -n 2 -- "$after" bench io --layout "$layout" --file "$f" --write --keep --reps 1 --json >/dev/null
sec() { python3 -c 'import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(r["read"]["median_s"] if "read" in r and isinstance(r["read"], dict) else r["read_s"][0])'; }
for i in $(seq "$runs"); do
    for b in "$before" "$after"; do
        t=$("$b" run -n 2 -- "$b" bench io --layout "$layout" --file "$f" --read --keep --reps 1 --json | sec)
        echo "$i $(basename "$b") $t"
    done
    for c in ompio romio321; do
        t=$(mpirun --allow-run-as-root --oversubscribe --mca io $c -n 2 "$peer" --n 512 --file "$dir/cp-$c-512" --reps 1 --keep | sec)
        echo "$i $c $t"
    done
done
