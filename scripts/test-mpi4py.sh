#!/usr/bin/env bash
# mpi4py's own test suite on Spools: builds mpi4py 4.1.2 against the MPI standard ABI into
# target/mpi-venv (cached; about 4 minutes the first time) and runs the sdist's test/
# under `spools run` with 1, 2 and 3 ranks, which load Spools' libmpi_abi.so.1: the
# whole suite, nothing skipped (dynamic processes included); the two modules that use no
# communicator run at 1 rank only (below).
# Before the suite, the `spools` package is built into the same environment and
# crates/spools-mpi/tests/package/ checks mpi4py and spools in one program (one runtime,
# the same communicators); so the suite then runs on the MPI library inside the package's
# extension, which `spools run` gives a Python interpreter that has the package.
# scripts/test.sh runs it after scripts/test-mpi.sh.
#
#   bash scripts/test-mpi4py.sh [RANKS...]      (default: 1 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."

# mpi4py's extension unoptimised for the tests (built in 30 s, not 200; the benchmarks
# build it with Python's own flags).
MPI4PY=1 MPI4PY_CFLAGS="-O0 -g0" source scripts/mpi-abi-env.sh
cargo build --locked -p spools-cli
make --no-print-directory -C crates/spools-mpi PROFILE=debug >/dev/null
"$mpi_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin>=1.7,<2" "numpy>=1.21" "pytest>=7"
VIRTUAL_ENV="$mpi_venv" PATH="$mpi_venv/bin:$PATH" \
  "$mpi_venv/bin/maturin" develop --quiet --locked -m crates/spools-py/Cargo.toml

spools="$(pwd)/target/debug/spools"

echo "== mpi4py and the spools package in one program"
SPOOLS_BIN="$(pwd)/target/debug/spools" "$mpi_venv/bin/python" -m pytest -q \
  -p no:cacheprovider crates/spools-mpi/tests/package

# Two modules never communicate: test_util_dtlib (MPI datatypes to numpy dtypes) and
# test_datatype (datatype constructors, envelopes, pickling) use no communicator, so each
# rank of a larger job would only repeat what one rank did (test_util_dtlib alone took 62 s
# of the suite's 181 at 1 rank). Where 1 is among the rank counts asked for, they run at
# 1 rank only (else at every count); every other module runs at every rank count.
lone=(-e 'test_util_dtlib' -e 'test_datatype')
ranks=("$@")
[ ${#ranks[@]} -eq 0 ] && ranks=(1 2 3)
for n in "${ranks[@]}"; do
  echo "== mpi4py's test suite on Spools, $n rank(s)"
  skip=()
  if [ "$n" != 1 ] && [[ " ${ranks[*]} " == *" 1 "* ]]; then skip=("${lone[@]}"); fi
  (cd "$mpi4py_tests" && timeout 1200 "$spools" run -n "$n" --timeout 1100 -- \
    "$mpi_venv/bin/python" main.py -q "${skip[@]}")
done
