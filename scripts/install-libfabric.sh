#!/usr/bin/env bash
# Installs libfabric from Debian's packages when missing: libfabric1 (the library Spools
# opens at run time for SPOOLS_TRANSPORT=ofi, crates/spools-fabric/src/ofi/ffi.rs) and
# libfabric-bin (fi_info, and fi_pingpong for the benchmarks). No headers are needed to
# build: Spools declares the part of the ABI it uses itself. scripts/test.sh and
# scripts/bench-ofi.sh run this.
set -euo pipefail
missing=()
/sbin/ldconfig -p 2>/dev/null | grep 'libfabric\.so\.1 ' >/dev/null || missing+=(libfabric1)
command -v fi_info >/dev/null || missing+=(libfabric-bin)
if [ "${#missing[@]}" = 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "== installing ${missing[*]} from Debian"
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
/sbin/ldconfig -p | grep 'libfabric\.so\.1 ' >/dev/null && command -v fi_info >/dev/null
