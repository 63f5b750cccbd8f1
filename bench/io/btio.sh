#!/usr/bin/env bash
# BT-IO in the spirit of SCI-MPICH's experiment: examples/mpi/btio.f90 (a 3-D grid of
# 5-component double records on a 2-D grid of ranks, appended step after step to one file
# through collective MPI-IO with subarray views, then read back and checked) built by
# Spools' mpifort and by Debian's Open MPI mpifort, run alternately on Spools and on Open
# MPI with ROMIO and with OMPIO, RUNS times each; prints every run and the medians of the
# write and read bandwidth (MB/s, the slowest rank's time, open to close).
#
#   bash bench/io/btio.sh [N] [STEPS] [RANKS] [RUNS] [DIR]     # defaults: 64 5 4 5 target/bench-btio
#
# Needs `cargo build --release -p spools-cli && make -C crates/spools-mpi` (release
# mpifort) and Open MPI's mpifort.openmpi and mpirun.openmpi (scripts/install-mpi.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-64} steps=${2:-5} ranks=${3:-4} runs=${4:-5} dir=${5:-target/bench-btio}
mkdir -p "$dir"
target/release/mpifort -O2 -o "$dir/btio-spools" examples/mpi/btio.f90 2>/dev/null
mpifort.openmpi -O2 -o "$dir/btio-ompi" examples/mpi/btio.f90 2>/dev/null
ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe -n "$ranks")
out="$dir/runs.txt"
: > "$out"
for i in $(seq "$runs"); do
  for who in spools romio321 ompio; do
    f="$dir/bt-$who.dat"
    rm -f "$f"
    if [ "$who" = spools ]; then
      line=$(target/release/spools run -n "$ranks" -- "$dir/btio-spools" "$f" "$n" "$steps" --time | tail -1)
    else
      line=$("${ompi[@]}" --mca io "$who" "$dir/btio-ompi" "$f" "$n" "$steps" --time | tail -1)
    fi
    echo "$i $who $line" | tee -a "$out"
  done
done
rm -f "$dir"/bt-*.dat
python3 - "$out" "$n" "$steps" "$ranks" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if "MB/s" in l]
print("BT-IO %s^3, %s steps, %s ranks: medians of %d runs (MB/s)" % (
    sys.argv[2], sys.argv[3], sys.argv[4], len(rows) // 3))
print("| MPI-IO | write | read |")
print("|---|---|---|")
for who, name in (("spools", "Spools"), ("romio321", "Open MPI 4.1, ROMIO"), ("ompio", "Open MPI 4.1, OMPIO")):
    w = [float(r[r.index("write") + 1]) for r in rows if r[1] == who]
    rd = [float(r[r.index("read") + 1]) for r in rows if r[1] == who]
    print("| %s | %.0f | %.0f |" % (name, statistics.median(w), statistics.median(rd)))
PY
