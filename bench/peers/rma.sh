#!/usr/bin/env bash
# The one-sided (RMA) peer benchmark: bench/peers/rma.c (OSU's osu_put_latency,
# osu_get_latency, osu_acc_latency, osu_put_bw and osu_get_bw with passive target and
# MPI_Win_flush, 2 ranks, 8 B to 4 MiB) on Spools' libmpi_abi.so.1, on MPICH 5.0.2's
# libmpi_abi.so.1 (the same binary) and on Open MPI (rebuilt with mpicc.openmpi).
#
# Usage: bench/peers/rma.sh [--runs N] [--out DIR] [--flavor allocate|create]
#                           [--tests LIST] [--skip-spools]
#   (also reached as bench/peers/run.sh --suite rma, with --runs, --out and --skip-spools)
#
#   --runs N           rounds of every test, interleaved across the implementations
#                      (default 3); the summary takes the median per size
#   --out DIR          where the programs, the tables, the logs and the summary go
#                      (default target/bench-peers/rma under the repository root)
#   --flavor F         the window: allocate (MPI_Win_allocate, the default, as OSU's) or
#                      create (MPI_Win_create on malloc'd memory, OSU's -w create)
#   --tests LIST       comma-separated (default put_latency,get_latency,acc_latency,
#                      put_bw,get_bw)
#   --skip-spools      no Spools column (no cargo build): MPICH ABI and Open MPI only
#
# Steps: source scripts/mpi-abi-env.sh (target/mpi-venv: the mpich wheel's mpicc_abi,
# mpiexec and MPICH's own libmpi_abi.so.1); install Open MPI through scripts/install-mpi.sh
# if mpicc.openmpi / mpirun.openmpi are missing; build Spools' libmpi_abi.so.1 (make -C
# crates/spools-mpi) and the spools command (cargo build --release --locked -p
# spools-cli); build rma.c once with mpicc_abi -O2 into DIR/rma-abi, with a constructor
# (bench/peers/abi_which.c) by which every rank reports on stderr the libmpi_abi it loaded
# and its MPI_Get_library_version, and once with mpicc.openmpi -O2 into DIR/rma-openmpi.
# Then per run and test: `spools run -n 2 -- rma-abi TEST` (Spools, which puts its
# library first on LD_LIBRARY_PATH), the wheel's `mpiexec -n 2 rma-abi TEST` (MPICH ABI)
# and `mpirun.openmpi --oversubscribe -n 2 rma-openmpi TEST` (Open MPI), each table kept
# as DIR/TEST-{spools,mpich-abi,openmpi}.runI.txt (stderr in DIR/logs/). The run stops if
# a program fails (its data check prints FAIL and aborts) or if Spools' run did not load
# Spools' library or MPICH's did not load MPICH's. rma_summary.py then prints one Markdown
# table per test (size | Spools | MPICH ABI | Open MPI | Spools/MPICH ABI | Spools/Open
# MPI, medians), also kept as DIR/summary.md; DIR/host.txt records the versions, the
# libraries and Open MPI's osc component (as its osc_base_verbose output names it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

runs=3
out=""
flavor=allocate
all_tests="put_latency,get_latency,acc_latency,put_bw,get_bw"
tests=$all_tests
skip_spools=0

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; }

while (($# > 0)); do
    case $1 in
    --runs)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "rma.sh: --runs needs a positive integer" >&2; exit 2; }
        runs=$2; shift 2 ;;
    --out)
        [[ $# -ge 2 && -n $2 ]] || { echo "rma.sh: --out needs a directory" >&2; exit 2; }
        out=$2; shift 2 ;;
    --flavor)
        [[ $# -ge 2 && $2 =~ ^(allocate|create)$ ]] || { echo "rma.sh: --flavor needs allocate or create" >&2; exit 2; }
        flavor=$2; shift 2 ;;
    --tests)
        t='(put_latency|get_latency|acc_latency|put_bw|get_bw)'
        [[ $# -ge 2 && $2 =~ ^$t(,$t)*$ ]] || { echo "rma.sh: --tests needs a list of ${all_tests//,/, }" >&2; exit 2; }
        tests=$2; shift 2 ;;
    --skip-spools) skip_spools=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "rma.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

out=${out:-$root/target/bench-peers/rma}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
cd "$root"
log() { printf '==> %s\n' "$*" >&2; }

command -v python3 >/dev/null || { echo "rma.sh: python3 is needed" >&2; exit 1; }

log "the MPI standard ABI: target/mpi-venv (scripts/mpi-abi-env.sh: PyPI's mpich==5.0.2)"
# Sets mpi_venv, mpicc_abi and mpich_lib (installs the wheel the first time only).
source "$root/scripts/mpi-abi-env.sh"
mpiexec_abi="$mpi_venv/bin/mpiexec"
[[ -x $mpicc_abi && -x $mpiexec_abi && -e $mpich_lib/libmpi_abi.so.1 ]] \
    || { echo "rma.sh: target/mpi-venv lacks mpicc_abi, mpiexec or lib/libmpi_abi.so.1" >&2; exit 1; }
mpich_abi_lib=$(readlink -f "$mpich_lib/libmpi_abi.so.1")

if ! command -v mpicc.openmpi >/dev/null || ! command -v mpirun.openmpi >/dev/null; then
    log "installing Open MPI (scripts/install-mpi.sh)"
    "$root/scripts/install-mpi.sh"
fi
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null \
    || { echo "rma.sh: no mpicc.openmpi / mpirun.openmpi after scripts/install-mpi.sh" >&2; exit 1; }

spools="${CARGO_TARGET_DIR:-$root/target}/release/spools"
spools_abi_lib=""
if ((skip_spools == 0)); then
    log "building Spools' libmpi_abi.so.1 (make -C crates/spools-mpi)"
    make --no-print-directory -C "$root/crates/spools-mpi" >&2
    log "building spools (cargo build --release --locked -p spools-cli)"
    cargo build --release --locked -p spools-cli
    [[ -x $spools ]] || { echo "rma.sh: $spools was not built" >&2; exit 1; }
    # spools run takes the library beside its executable (SPOOLS_MPI_LIB would override).
    unset SPOOLS_MPI_LIB
    spools_abi_lib=$(readlink -f "$(dirname "$spools")/libmpi_abi.so.1" || true)
    [[ -n $spools_abi_lib && -f $spools_abi_lib ]] \
        || { echo "rma.sh: no libmpi_abi.so.1 beside $spools" >&2; exit 1; }
fi

# Every rank of an ABI run says which libmpi_abi it loaded and what that library calls
# itself (MPI_Get_library_version may be called before MPI_Init): bench/peers/abi_which.c.
log "building rma.c once with $mpicc_abi into $out/rma-abi, and with mpicc.openmpi"
"$mpicc_abi" -O2 -Wall -Wextra -o "$out/rma-abi" "$here/rma.c" -DWHICH_PREFIX='"rma-abi"' "$here/abi_which.c"
mpicc.openmpi -O2 -Wall -Wextra -o "$out/rma-openmpi" "$here/rma.c"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_run=(mpirun.openmpi --oversubscribe -n 2)

# Which osc component Open MPI takes for this flavour: the one that names itself when
# the window is freed (rdma does; sm says nothing).
osc=$("${ompi_run[@]}" --mca osc_base_verbose 100 "$out/rma-openmpi" put_latency --win "$flavor" \
    --max-size 8 --iterations 1 --warmup 0 2>&1 | sed -n 's/.*\] \([a-z0-9_]*\) component destroying window.*/\1/p' | head -n1 || true)
osc_conf=$(grep -h '^[[:space:]]*osc[[:space:]]*=' /etc/openmpi/openmpi-mca-params.conf 2>/dev/null | tr -s ' ' || true)

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit+=" (with local changes)"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $(nproc) cores, ${cpu:-unknown CPU}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "window: MPI_Win_$flavor; passive target, MPI_Win_lock(SHARED) + MPI_Win_flush; 2 ranks"
    echo "rma-abi: bench/peers/rma.c by the mpich wheel's mpicc_abi -O2, one binary for both ABI columns"
    if ((skip_spools == 0)); then
        echo "Spools: $spools_abi_lib (spools run -n 2), commit $commit"
    fi
    echo "MPICH ABI: $("$mpi_venv/bin/mpichversion" 2>/dev/null | head -n1 | tr -s ' \t' ' ') ($mpich_abi_lib, the wheel's mpiexec -n 2)"
    echo "Open MPI: $(mpirun.openmpi --version 2>/dev/null | head -n1), rma.c by mpicc.openmpi -O2, ${ompi_run[*]}; osc: ${osc:-not named (sm names nothing)}${osc_conf:+ (/etc/openmpi/openmpi-mca-params.conf: $osc_conf)}"
    echo "runs: $runs"
} >"$out/host.txt"
rm -f "$out"/*.run*.txt

# table NAME CMD...: run CMD, keep its stdout as $out/NAME.txt (stderr in logs/NAME.log).
table() {
    local name=$1 start=$SECONDS
    shift
    printf '  %-34s' "$name" >&2
    if ! "$@" >"$out/$name.txt" 2>"$out/logs/$name.log"; then
        echo "FAILED" >&2
        echo "rma.sh: $*" >&2
        tail -n 20 "$out/logs/$name.log" "$out/$name.txt" >&2
        exit 1
    fi
    printf 'ok (%ds)\n' $((SECONDS - start)) >&2
}

# abi_check NAME LIB WORD: both ranks of the ABI run NAME loaded LIB (a real path) and
# their MPI_Get_library_version names WORD; else stop, with what they loaded.
abi_check() {
    local name=$1 want=$2 word=$3 log="$out/logs/$1.log" libs versions bad=0 l
    mapfile -t libs < <(sed -n 's/.*rma-abi-library: pid [0-9]* loaded //p' "$log")
    mapfile -t versions < <(sed -n 's/.*rma-abi-version: pid [0-9]* //p' "$log")
    ((${#libs[@]} == 2 && ${#versions[@]} == 2)) || bad=1
    for l in "${libs[@]}"; do [[ $l == "$want" ]] || bad=1; done
    for l in "${versions[@]}"; do [[ $l == *"$word"* ]] || bad=1; done
    if ((bad)); then
        {
            echo "rma.sh: WRONG MPI LIBRARY in $name: its 2 ranks had to load $want ($word)"
            echo "  they loaded: ${libs[*]:-nothing reported}"
            echo "  they are: ${versions[*]:-nothing reported}"
        } >&2
        exit 1
    fi
}

IFS=, read -r -a test_list <<<"$tests"
for ((i = 1; i <= runs; i++)); do
    log "run $i of $runs (MPI_Win_$flavor)"
    for t in "${test_list[@]}"; do
        args=("$t" --win "$flavor")
        if ((skip_spools == 0)); then
            table "$t-spools.run$i" "$spools" run -n 2 -- "$out/rma-abi" "${args[@]}"
            abi_check "$t-spools.run$i" "$spools_abi_lib" Spools
        fi
        # The binary's RUNPATH already names the wheel's lib; LD_LIBRARY_PATH makes sure
        # nothing from the caller's environment comes first.
        table "$t-mpich-abi.run$i" "$mpiexec_abi" -n 2 \
            env LD_LIBRARY_PATH="$mpich_lib" "$out/rma-abi" "${args[@]}"
        abi_check "$t-mpich-abi.run$i" "$mpich_abi_lib" MPICH
        table "$t-openmpi.run$i" "${ompi_run[@]}" "$out/rma-openmpi" "${args[@]}"
    done
done

log "summary (also in $out/summary.md)"
python3 "$here/rma_summary.py" "$out" | tee "$out/summary.md"
