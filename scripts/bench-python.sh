#!/usr/bin/env bash
# The Python interface beside mpi4py: the same programs written with `spools` and with
# mpi4py (bench/python/), run side by side in alternating runs, medians and ratios; and the
# same mpi4py program once more on Spools, through the MPI standard ABI.
#
#   bash scripts/bench-python.sh [--runs N] [--out DIR] [--only LIST] [--native] [--no-abi]
#                                [--setup-only]
#
#   --runs N      runs of every benchmark, alternating spools, mpi4py on Open MPI and
#                 mpi4py on Spools (default 5)
#   --out DIR     raw results and summary (default target/bench-python)
#   --only LIST   comma-separated subset of pingpong,coll,redist (default all)
#   --native      with pingpong, also time 8 B without Python in the same runs: `spools
#                 bench osu latency` (Rust) and bench/peers/osu.c on Open MPI (C)
#   --no-abi      without mpi4py on Spools (nothing of target/mpi-venv needed)
#   --setup-only  build and install everything, run nothing
#
# Steps: install Open MPI from Debian if mpicc.openmpi/mpirun.openmpi are missing
# (scripts/install-mpi.sh); create the virtual environment target/py-bench-venv
# (SPOOLS_PY_BENCH_VENV picks another) and install numpy, maturin and mpi4py from PyPI,
# mpi4py compiled against Debian's Open MPI (pip --no-binary mpi4py, MPICC=mpicc.openmpi);
# build spools-cli optimised (cargo build --release) and install the `spools` package
# optimised into the environment (maturin develop --release); unless --no-abi, mpi4py 4.1.2
# built against the MPI 5.0 standard ABI in target/mpi-venv (MPI4PY=1 scripts/mpi-abi-env.sh,
# cached) and Spools' libmpi_abi.so.1 (make -C crates/spools-mpi), checked to be what that
# mpi4py loads under `spools run`; then bench/python/run.py runs the programs (spools under
# `spools run -n N`, mpi4py under `mpirun --oversubscribe -n N`, Open MPI as installed, as
# bench/peers/osu.sh runs it, and mpi4py on Spools: `spools run -n N -- env
# target/mpi-venv/bin/python bench_mpi4py.py`, its own numpy from that environment, on the
# release libmpi_abi.so.1 rather than the spools package's extension: see run.py) and
# writes DIR/runs.jsonl (every sample), DIR/host.txt and DIR/summary.md (medians of the
# runs, ratios, goals, and the column mpi4py on Spools with its ratio to mpi4py on Open MPI).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

runs=5
out=""
only="pingpong,coll,redist"
setup_only=0
native=()
abi=1
while (($# > 0)); do
    case $1 in
    --runs)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "bench-python.sh: --runs needs a positive integer" >&2; exit 2; }
        runs=$2; shift 2 ;;
    --out)
        [[ $# -ge 2 && -n $2 ]] || { echo "bench-python.sh: --out needs a directory" >&2; exit 2; }
        out=$2; shift 2 ;;
    --only)
        [[ $# -ge 2 && $2 =~ ^(pingpong|coll|redist)(,(pingpong|coll|redist))*$ ]] \
            || { echo "bench-python.sh: --only needs a list of pingpong, coll, redist" >&2; exit 2; }
        only=$2; shift 2 ;;
    --setup-only) setup_only=1; shift ;;
    --no-abi) abi=0; shift ;;
    --native) native=(--native --mpicc "$(command -v mpicc.openmpi || echo mpicc)"); shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "bench-python.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
out=${out:-$root/target/bench-python}
log() { printf '==> %s\n' "$*" >&2; }

if ! command -v mpicc.openmpi >/dev/null || ! command -v mpirun.openmpi >/dev/null; then
    log "installing Open MPI from Debian (scripts/install-mpi.sh)"
    bash scripts/install-mpi.sh
fi
mpicc=$(command -v mpicc.openmpi || command -v mpicc)
mpirun=$(command -v mpirun.openmpi || command -v mpirun)

venv="${SPOOLS_PY_BENCH_VENV:-target/py-bench-venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    log "creating the virtual environment $venv"
    "$python" -m venv "$venv"
fi
venv=$(cd "$venv" && pwd)
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
log "installing numpy and maturin from PyPI into $venv"
"${pip[@]}" "maturin>=1.7,<2" "numpy>=1.21"
# mpi4py compiled here with Open MPI's compiler wrapper (not a wheel with its own MPI).
if ! "$venv/bin/python" -c "from mpi4py import MPI; assert 'Open MPI' in MPI.Get_library_version()" 2>/dev/null; then
    log "installing mpi4py from PyPI, compiled with $mpicc"
    MPICC="$mpicc" "${pip[@]}" --no-binary mpi4py --no-cache-dir "mpi4py>=3.1"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lib=$("$venv/bin/python" -c "from mpi4py import MPI; print(MPI.Get_library_version().replace(chr(0), '').splitlines()[0])")
case $lib in
*"Open MPI"*) log "mpi4py: $lib" ;;
*) echo "bench-python.sh: mpi4py is not built on Open MPI: $lib" >&2; exit 1 ;;
esac

log "building spools optimised (cargo build --release -p spools-cli)"
cargo build --locked --release -p spools-cli
spools="${CARGO_TARGET_DIR:-$root/target}/release/spools"
[[ -x $spools ]] || { echo "bench-python.sh: $spools was not built" >&2; exit 1; }
log "installing the spools package optimised (maturin develop --release)"
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
    "$venv/bin/maturin" develop --quiet --locked --release -m crates/spools-py/Cargo.toml
"$venv/bin/python" -c "import spools" || { echo "bench-python.sh: the spools package does not import" >&2; exit 1; }

sides=spools,mpi4py
if ((abi)); then
    sides=spools,mpi4py,mpi4py-spools
    log "mpi4py built against the MPI standard ABI in target/mpi-venv (scripts/mpi-abi-env.sh)"
    MPI4PY=1 source scripts/mpi-abi-env.sh
    log "building Spools' libmpi_abi.so.1 (make -C crates/spools-mpi)"
    make --no-print-directory -C crates/spools-mpi >&2
    # Through env, as run.py starts it: a rank program named python* that finds the spools
    # package would get the package's extension instead of libmpi_abi.so.1 (see run.py).
    abi_lib=$(env -u SPOOLS_MPI_LIB "$spools" run -n 1 -- env "$mpi_venv/bin/python" -c \
        "from mpi4py import MPI; print(MPI.Get_library_version().replace(chr(0), '').splitlines()[0])")
    case $abi_lib in
    *Spools*"$(readlink -f "$(dirname "$spools")/libmpi_abi.so.1")"*) log "mpi4py on Spools: $abi_lib" ;;
    *) echo "bench-python.sh: mpi4py under spools run did not load Spools' libmpi_abi.so.1: $abi_lib" >&2; exit 1 ;;
    esac
fi

((setup_only == 0)) || exit 0
exec "$venv/bin/python" bench/python/run.py --runs "$runs" --out "$out" --only "$only" \
    --spools "$spools" --mpirun "$mpirun" --python "$venv/bin/python" --sides "$sides" "${native[@]}"
