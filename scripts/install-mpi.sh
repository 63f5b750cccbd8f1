#!/usr/bin/env bash
# Installs Open MPI from Debian's packages if `mpirun` and `mpicc` are missing
# (for the mpirun test and the peer benchmarks in bench/peers).
set -euo pipefail
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "== installing Open MPI (openmpi-bin libopenmpi-dev) from Debian"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
command -v mpirun >/dev/null
