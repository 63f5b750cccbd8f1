#!/usr/bin/env bash
# The osu suite of the peer benchmarks: `spools bench osu TEST` beside the same tests with
# Open MPI and MPICH (bench/peers/osu.c), in the OSU micro-benchmarks' table format.
#
# Usage: bench/peers/osu.sh [--runs N] [--out DIR] [--tests LIST] [--coll-ranks LIST]
#                           [--coll-max-size BYTES] [--mpich-max-ranks N] [--skip-spools]
#   (also reached as bench/peers/run.sh --suite osu, with the same options)
#
#   --runs N           rounds of every test, interleaved across the three implementations
#                      (default 3); the summary takes the median per size
#   --out DIR          where the programs, the tables and the summary go (default
#                      target/bench-peers/osu under the repository root)
#   --tests LIST       comma-separated (default latency,bw,bibw,allreduce,bcast,barrier,alltoall)
#   --coll-ranks LIST  rank counts of the collectives, comma-separated (default 2; more
#                      ranks than cores oversubscribe, where MPICH's busy polling collapses)
#   --coll-max-size B  largest message of the collectives (default: OSU's 1 MiB; the
#                      small-message goals need 4096)
#   --mpich-max-ranks N  run MPICH's collectives only up to N ranks (default: all; with
#                      more ranks than cores MPICH's busy polling takes milliseconds per
#                      call, so a run of 4 or 8 ranks on 2 cores lasts tens of minutes;
#                      the summary shows n/a there)
#   --skip-spools      only the two MPIs (no cargo build)
#
# Steps: install Open MPI and MPICH from Debian through scripts/install-mpi.sh --with-mpich
# if mpicc.openmpi / mpicc.mpich are missing (that script leaves /usr/bin/mpicc and mpirun
# pointing where they did); build osu.c with mpicc.openmpi and mpicc.mpich (-O2); build
# spools (cargo build --release -p spools-cli); then per run and test: spools run -n P --
# spools bench osu TEST, mpirun.openmpi -n P osu-openmpi TEST, mpirun.mpich -n P osu-mpich
# TEST, each table kept as DIR/TEST[-PN]-{spools,openmpi,mpich}.runI.txt. osu_summary.py
# then prints one Markdown table per test (size | Spools | Open MPI | MPICH |
# Spools/Open MPI), also kept as DIR/summary.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

runs=3
out=""
tests="latency,bw,bibw,allreduce,bcast,barrier,alltoall"
coll_ranks="2"
coll_max=""
mpich_max=""
skip_spools=0

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; }

while (($# > 0)); do
    case $1 in
    --runs)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "osu.sh: --runs needs a positive integer" >&2; exit 2; }
        runs=$2; shift 2 ;;
    --out)
        [[ $# -ge 2 && -n $2 ]] || { echo "osu.sh: --out needs a directory" >&2; exit 2; }
        out=$2; shift 2 ;;
    --tests)
        [[ $# -ge 2 && $2 =~ ^(latency|bw|bibw|allreduce|bcast|barrier|alltoall)(,(latency|bw|bibw|allreduce|bcast|barrier|alltoall))*$ ]] \
            || { echo "osu.sh: --tests needs a list of latency, bw, bibw, allreduce, bcast, barrier, alltoall" >&2; exit 2; }
        tests=$2; shift 2 ;;
    --coll-ranks)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "osu.sh: --coll-ranks needs rank counts" >&2; exit 2; }
        coll_ranks=$2; shift 2 ;;
    --coll-max-size)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "osu.sh: --coll-max-size needs a size in bytes" >&2; exit 2; }
        coll_max=$2; shift 2 ;;
    --mpich-max-ranks)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "osu.sh: --mpich-max-ranks needs a rank count" >&2; exit 2; }
        mpich_max=$2; shift 2 ;;
    --skip-spools) skip_spools=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "osu.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

out=${out:-$root/target/bench-peers/osu}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
cd "$root"
log() { printf '==> %s\n' "$*" >&2; }

if ! command -v mpicc.openmpi >/dev/null || ! command -v mpicc.mpich >/dev/null \
    || ! command -v mpirun.mpich >/dev/null; then
    log "installing Open MPI and MPICH (scripts/install-mpi.sh --with-mpich)"
    "$root/scripts/install-mpi.sh" --with-mpich
fi
command -v python3 >/dev/null || { echo "osu.sh: python3 is needed for the summary" >&2; exit 1; }

log "building osu.c with mpicc.openmpi and mpicc.mpich into $out"
mpicc.openmpi -O2 -Wall -Wextra -o "$out/osu-openmpi" "$here/osu.c"
mpicc.mpich -O2 -Wall -Wextra -o "$out/osu-mpich" "$here/osu.c"

spools="${CARGO_TARGET_DIR:-$root/target}/release/spools"
if ((skip_spools == 0)); then
    log "building spools (cargo build --release -p spools-cli)"
    cargo build --release -p spools-cli
    [[ -x $spools ]] || { echo "osu.sh: $spools was not built" >&2; exit 1; }
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $(nproc) cores"
    echo "open mpi: $(mpirun.openmpi --version 2>/dev/null | head -n1)"
    echo "mpich: $(mpichversion 2>/dev/null | head -n1 || mpirun.mpich --version 2>/dev/null | head -n1)"
    echo "spools: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "runs: $runs; collectives on $coll_ranks ranks${coll_max:+, up to $coll_max B}${mpich_max:+; MPICH up to $mpich_max ranks}"
} >"$out/host.txt"
rm -f "$out"/*.run*.txt

# table NAME CMD...: run CMD, keep its stdout as $out/NAME.txt (stderr in logs/NAME.log).
table() {
    local name=$1 start=$SECONDS
    shift
    printf '  %-40s' "$name" >&2
    if ! "$@" >"$out/$name.txt" 2>"$out/logs/$name.log"; then
        echo "FAILED" >&2
        echo "osu.sh: $*" >&2
        tail -n 20 "$out/logs/$name.log" "$out/$name.txt" >&2
        exit 1
    fi
    printf 'ok (%ds)\n' $((SECONDS - start)) >&2
}

IFS=, read -r -a test_list <<<"$tests"
IFS=, read -r -a rank_list <<<"$coll_ranks"
for ((i = 1; i <= runs; i++)); do
    log "run $i of $runs"
    for t in "${test_list[@]}"; do
        case $t in
        latency | bw | bibw) ranks=(2); suffix=0; extra=() ;;
        *)
            ranks=("${rank_list[@]}"); suffix=1; extra=()
            if [[ -n $coll_max && $t != barrier ]]; then extra=(--max-size "$coll_max"); fi
            ;;
        esac
        for p in "${ranks[@]}"; do
            name=$t
            if ((suffix)); then name="$t-P$p"; fi
            if ((skip_spools == 0)); then
                table "$name-spools.run$i" "$spools" run -n "$p" -- "$spools" bench osu "$t" "${extra[@]}"
            fi
            table "$name-openmpi.run$i" mpirun.openmpi --oversubscribe -n "$p" "$out/osu-openmpi" "$t" "${extra[@]}"
            if [[ -z $mpich_max ]] || ((p <= mpich_max)); then
                table "$name-mpich.run$i" mpirun.mpich -n "$p" "$out/osu-mpich" "$t" "${extra[@]}"
            fi
        done
    done
done

log "summary (also in $out/summary.md)"
python3 "$here/osu_summary.py" "$out" | tee "$out/summary.md"
