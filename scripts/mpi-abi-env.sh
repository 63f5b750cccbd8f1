#!/usr/bin/env bash
# Sourced by the MPI ABI scripts: the virtual environment target/mpi-venv (its own, so
# that MPICH's mpiexec and mpicc never shadow Open MPI's for the other tests) holding
# PyPI's mpich==5.0.2 wheel (mpicc_abi, mpi_abi.h, mpiexec and MPICH's own
# libmpi_abi.so.1, the peer) and, with MPI4PY=1, mpi4py 4.1.2 built against the standard
# ABI, with its test suite unpacked in target/mpi4py-4.1.2/test. Both are cached: a
# second run installs nothing. Sets `mpi_venv`, `mpicc_abi`, `mpich_lib`, `mpi4py_tests`.
# MPI4PY_CFLAGS: the C compiler's flags for mpi4py's extension (unset or empty: "-O2",
# as the benchmarks want; the test suite asks for "-O0 -g0", which builds in 30 s instead
# of 200 here); mpi4py is built again when they change. They go in as CFLAGS: with CFLAGS
# empty (this script's default until 2026-12-01) the extension came out unoptimised
# (Python's inline helpers such as Py_DECREF left as functions), and mpi4py on Spools
# took 1.5 us per 8-byte message where the -O2 build takes 0.85.
mpi_venv="$(pwd)/target/mpi-venv"
if [ ! -x "$mpi_venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$mpi_venv"
fi
if [ ! -x "$mpi_venv/bin/mpicc_abi" ]; then
  "$mpi_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mpich==5.0.2" "pytest>=7" "numpy>=1.21"
fi
mpicc_abi="$mpi_venv/bin/mpicc_abi"
mpich_lib="$mpi_venv/lib"
mpi4py_tests="$(pwd)/target/mpi4py-4.1.2/test"
if [ "${MPI4PY:-0}" = 1 ]; then
  mpi4py_flags="$mpi_venv/.mpi4py-cflags"
  if ! "$mpi_venv/bin/python" -c "import mpi4py, sys; sys.exit(mpi4py.__version__ != '4.1.2')" 2>/dev/null \
    || [ "$(cat "$mpi4py_flags" 2>/dev/null)" != "${MPI4PY_CFLAGS:--O2}" ]; then
    # mpi4py's extension is built by mpicc_abi against the standard ABI: it then needs
    # any libmpi_abi.so.1 (MPICH's through its RUNPATH, or Spools' first on
    # LD_LIBRARY_PATH). Never from pip's wheel cache: a wheel built for another checkout
    # carries that checkout's venv in its RUNPATH (a clone whose predecessor was deleted
    # found no MPICH at all).
    build_mpi4py() {
      CFLAGS="${MPI4PY_CFLAGS:--O2}" MPI4PY_BUILD_MPIABI=1 MPICC="$mpicc_abi" \
        "$mpi_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-cache-dir --no-binary mpi4py --force-reinstall --no-deps "mpi4py==4.1.2"
    }
    build_mpi4py 2>/dev/null || build_mpi4py
    echo "${MPI4PY_CFLAGS:--O2}" > "$mpi4py_flags"
  fi
  if [ ! -d "$mpi4py_tests" ]; then
    tmp="$(mktemp -d)"
    "$mpi_venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
      --no-binary :all: "mpi4py==4.1.2" -d "$tmp"
    tar -xzf "$tmp"/mpi4py-4.1.2.tar.gz -C target
    rm -rf "$tmp"
  fi
fi
