#!/bin/bash
# Device run: the kit's run.sh (Spools at this commit, MPICH 5.0.2, Open MPI 5.0.11), then the
# same collectives on Spools before (old/: spools and libmpi_abi.so.1 of another commit, put
# there by hand) and after (bin/), interleaved, one line each; then 32 and 64 ranks oversubscribed.
D=$(cd "$(dirname "$0")" && pwd)
F=${OUT:-.}/compare.txt; : > "$F"
say() { echo "$*" | tee -a "$F"; }
bash "$D/run.sh" "$@"
fig() { local o; o=$("$@"); local rc=$?; local l; l=$(grep -E '^[a-z0-9_]+ [0-9]' <<<"$o" | tail -1)
  if [ $rc = 0 ] && [ -n "$l" ]; then awk '{print ($1 ~ /^[0-9]+$/) ? $2 : $NF}' <<<"$l"; else echo "FAIL(rc=$rc)"; fi; }
sp() { local s=$1 n=$2; shift 2; env -u LD_LIBRARY_PATH timeout 60 "$s" run -n "$n" -- "$@" 2>&1; }
for P in 16 8 4 2; do
  for t in "barrier 0" "bcast 8" "reduce 8" "allreduce 8" "allgather 8" "alltoall 8" "gather 8" "scatter 8" "scan 8" "bcast 4096" "allreduce 4096"; do
    a=$(fig sp "$D/old/spools" $P "$D/bin/coll_abi" $t); b=$(fig sp "$D/bin/spools" $P "$D/bin/coll_abi" $t)
    c=$(fig sp "$D/bin/spools" $P "$D/bin/coll_abi" $t); d=$(fig sp "$D/old/spools" $P "$D/bin/coll_abi" $t)
    say "cmp $P $t old $a $d new $b $c"
  done
done
for P in 32 64; do
  say "cmp-over $P allreduce 8 old $(fig sp "$D/old/spools" $P "$D/bin/coll_abi" allreduce 8) new $(fig sp "$D/bin/spools" $P "$D/bin/coll_abi" allreduce 8)"
done
