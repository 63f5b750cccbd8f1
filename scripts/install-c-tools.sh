#!/usr/bin/env bash
# Installs what the C interface's tests need from Debian's packages when missing: a C and
# a C++ compiler (gcc, g++), make (crates/spools-c/Makefile installs the library) and
# pkg-config (the tests compile against the installed spools.pc). scripts/test-c.sh runs it.
set -euo pipefail
missing=()
command -v cc >/dev/null || missing+=(gcc libc6-dev)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
command -v pkg-config >/dev/null || missing+=(pkgconf)
if [ "${#missing[@]}" = 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "== installing ${missing[*]} from Debian"
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
command -v cc >/dev/null && command -v g++ >/dev/null && command -v make >/dev/null \
  && command -v pkg-config >/dev/null
