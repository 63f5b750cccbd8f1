#!/usr/bin/env bash
# Installs the HDF5 C runtime library (Debian's serial libhdf5) when it is missing.
# Spools opens libhdf5 at run time (crates/spools-io/src/file/hdf5/ffi.rs): no headers
# are needed to build, only the library to read and write HDF5 files. The HDF5 tests
# need it (h5py, from PyPI, brings its own copy); scripts/test.sh and the scripts that
# run those tests run this.
set -euo pipefail
# grep without -q reads ldconfig's whole output: with -q it exits at the first match,
# ldconfig dies of SIGPIPE, and under pipefail the pipeline fails (exit 141, seen in CI
# under load).
# The names Spools tries first (Debian and Ubuntu: libhdf5_serial.so.103 for HDF5 1.10,
# .310 for 1.14; elsewhere libhdf5.so.*).
if /sbin/ldconfig -p 2>/dev/null | grep -E 'libhdf5(_serial)?\.so\.(103|200|310|320) ' >/dev/null; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
# bookworm: libhdf5-103-1; Ubuntu 24.04: libhdf5-103-1t64; trixie: libhdf5-310.
pkg=""
for p in libhdf5-103-1 libhdf5-103-1t64 libhdf5-310; do
  if [ -n "$(apt-cache policy "$p" 2>/dev/null | grep -E '^ +Candidate: [^(]' || true)" ]; then
    pkg="$p"
    break
  fi
done
if [ -z "$pkg" ]; then
  echo "install-hdf5.sh: no libhdf5 runtime package found (tried libhdf5-103-1, libhdf5-103-1t64, libhdf5-310)" >&2
  exit 1
fi
echo "== installing $pkg (the HDF5 C library) from Debian"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$pkg" >/dev/null
/sbin/ldconfig -p | grep -E 'libhdf5(_serial)?\.so\.' >/dev/null
