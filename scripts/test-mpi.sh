#!/usr/bin/env bash
# The MPI standard ABI's tests (crates/spools-mpi): builds libmpi_abi.so.1 (debug, as
# `make -C crates/spools-mpi PROFILE=debug` does for users), checks that the generated
# stubs are up to date with the ABI's prototypes, and runs the pytest suite of
# crates/spools-mpi/tests: C programs compiled by mpicc_abi (PyPI's mpich wheel, in
# target/mpi-venv) run under `spools run`, the constants compared with the wheel's
# mpi_abi.h, and Fortran programs built by Spools' mpifort (test_fortran.py).
# scripts/test.sh runs it.
#
#   bash scripts/test-mpi.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/mpi-abi-env.sh
cargo build --locked -p spools-cli
make --no-print-directory -C crates/spools-mpi PROFILE=debug >/dev/null
python3 crates/spools-mpi/gen/exports.py "$mpi_venv/include/mpi_abi.h" --check
# The Fortran layer declares the C functions it calls itself (fortran/gen.py): compiled
# after the wheel's mpi_abi.h, any prototype that differs from the standard's is an error.
test -x target/debug/mpifort || { echo "test-mpi.sh: no target/debug/mpifort (is gfortran installed?)" >&2; exit 1; }
cc -fsyntax-only -include "$mpi_venv/include/mpi_abi.h" -x c target/debug/fortran/prototypes.h

SPOOLS_BIN="$(pwd)/target/debug/spools" SPOOLS_MPICC_ABI="$mpicc_abi" \
  "$mpi_venv/bin/python" -m pytest -q -p no:cacheprovider crates/spools-mpi/tests \
  --ignore=crates/spools-mpi/tests/package "$@"
