#!/usr/bin/env bash
# Installs Debian's HDF5 development files (libhdf5-dev: the serial library, its headers
# and pkg-config file) when missing. The `hdf5` cargo feature of spools-io links it;
# scripts/test.sh and the scripts that build the CLI with that feature run this.
set -euo pipefail
if pkg-config --exists hdf5 2>/dev/null || [ -f /usr/include/hdf5/serial/hdf5.h ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "== installing libhdf5-dev from Debian"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libhdf5-dev pkgconf >/dev/null
pkg-config --exists hdf5
