#!/usr/bin/env bash
# Small messages as the machine's load changes: Spools' tagged 8 B ping-pong and its short
# active message beside Open MPI's (pingpong.c) with 2 ranks on an idle machine and with
# CPU-bound processes beside them, and the token ring of 8 ranks on this machine's cores
# (ranks beyond the cores) beside Open MPI's (ring.c). Runs alternate program by program
# so that drift of the host hits all alike; the summary gives medians over the runs and
# the ratios Spools / Open MPI of those medians (under 1: Spools faster).
#
#   bash bench/peers/busy.sh [--runs N] [--busy K] [--out DIR]
#
#   --runs N   rounds of the whole set (default 5)
#   --busy K   CPU-bound processes (shell busy loops) beside the loaded runs (default 2)
#   --out DIR  where the programs, the raw figures and summary.md go (default
#              target/bench-busy)
#
# Installs Open MPI with scripts/install-mpi.sh when mpicc.openmpi is missing; builds the
# spools command (cargo build --release -p spools-cli). Every run is bounded (timeout 120 s;
# a run that does not finish counts as missing, and the summary says how many were).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=5
busy=2
out=$root/target/bench-busy
while (($# > 0)); do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --busy) busy=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 2 ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]*$ && $busy =~ ^[0-9]+$ ]] || { echo "busy.sh: --runs and --busy take numbers" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpicc.openmpi >/dev/null || bash scripts/install-mpi.sh
for p in pingpong ring; do mpicc.openmpi -O2 -Wall -o "$out/$p" "$here/$p.c"; done
cargo build --release -q -p spools-cli
spools=${CARGO_TARGET_DIR:-$root/target}/release/spools
mpirun=(mpirun.openmpi --allow-run-as-root --oversubscribe)
cpus=$(nproc)
ring_ranks=$((cpus * 4))

loops=()
stop_loops() {
    if ((${#loops[@]} > 0)); then kill "${loops[@]}" 2>/dev/null || true; wait "${loops[@]}" 2>/dev/null || true; fi
    loops=()
}
trap stop_loops EXIT
start_loops() {
    local i
    for ((i = 0; i < busy; i++)); do
        sh -c 'while :; do :; done' &
        loops+=($!)
    done
}

# One figure per line into $out/raw.txt: "<case> <program> <value>".
: >"$out/raw.txt"
record() { [[ -n $3 ]] && echo "$1 $2 $3" >>"$out/raw.txt" || echo "$1 $2 missing" >>"$out/raw.txt"; }
spools_tagged() { timeout 120 "$spools" run -n 2 -- "$spools" bench pingpong --api tagged --sizes 8 --reps 5 2>/dev/null | awk '$1==8{print $2}' || true; }
spools_am() { timeout 120 "$spools" run -n 2 -- "$spools" bench pingpong --sizes 8 --reps 5 2>/dev/null | awk '$1=="short"{print $3}' || true; }
ompi_pp() { timeout 120 "${mpirun[@]}" -n 2 "$out/pingpong" 8 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["series"][0]["points"][0]["latency_us"])' 2>/dev/null || true; }
spools_ring() { timeout 120 "$spools" run -n "$ring_ranks" -- "$spools" bench ring --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["hop_us"])' 2>/dev/null || true; }
ompi_ring() { timeout 120 "${mpirun[@]}" -n "$ring_ranks" "$out/ring" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["hop_us"])' 2>/dev/null || true; }

for ((r = 1; r <= runs; r++)); do
    echo "run $r of $runs" >&2
    record idle spools-tagged "$(spools_tagged)"
    record idle ompi "$(ompi_pp)"
    record idle spools-am "$(spools_am)"
    record ring spools "$(spools_ring)"
    record ring ompi "$(ompi_ring)"
    start_loops
    record busy spools-tagged "$(spools_tagged)"
    record busy ompi "$(ompi_pp)"
    record busy spools-am "$(spools_am)"
    stop_loops
done

python3 - "$out/raw.txt" "$busy" "$cpus" "$ring_ranks" <<'EOF' | tee "$out/summary.md"
import statistics, sys
from collections import defaultdict
raw, busy, cpus, ring = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
vals, missing = defaultdict(list), defaultdict(int)
for line in open(raw):
    case, prog, v = line.split()
    if v == "missing":
        missing[(case, prog)] += 1
    else:
        vals[(case, prog)].append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
label = {"idle": "8 B one-way, idle machine (us)",
         "busy": f"8 B one-way, {busy} CPU-bound processes beside (us)",
         "ring": f"token ring, {ring} ranks on {cpus} cores (us per hop)"}
print("| case | Spools tagged | Spools short AM | Open MPI | tagged / Open MPI | tagged / short AM |")
print("|---|---|---|---|---|---|")
for case in ["idle", "busy", "ring"]:
    t = med.get((case, "spools-tagged"), med.get((case, "spools")))
    a = med.get((case, "spools-am"))
    o = med.get((case, "ompi"))
    f = lambda x: "n/a" if x is None else f"{x:.3f}"
    r = lambda x, y: "n/a" if x is None or y is None else f"{x / y:.2f}"
    print(f"| {label[case]} | {f(t)} | {f(a)} | {f(o)} | {r(t, o)} | {r(t, a)} |")
n = max((len(v) for v in vals.values()), default=0)
print(f"\nMedians of up to {n} alternating runs; runs that did not finish: "
      + (", ".join(f"{c} {p}: {k}" for (c, p), k in missing.items()) or "none") + ".")
EOF
