#!/usr/bin/env bash
# Installs Open MPI from Debian's packages if `mpirun` and `mpicc` are missing
# (for the mpirun test and the peer benchmarks in bench/peers), gfortran (Spools'
# Fortran layer; Open MPI's mpifort for the Fortran peer test), and the PMIx header with
# pkg-config (pkgconf, libpmix-dev) for the PMIx ABI test.
#
#   scripts/install-mpi.sh               Open MPI only (what the test suite needs)
#   scripts/install-mpi.sh --with-mpich  also Debian's MPICH (`mpicc.mpich`,
#                                        `mpirun.mpich`), for bench/peers/run.sh only
#
# MPICH and Open MPI share Debian's `mpi` and `mpirun` alternatives (/usr/bin/mpicc,
# /usr/bin/mpirun, mpiexec, the pkg-config and include links). In auto mode the one with
# the higher priority wins (Open MPI on amd64), but an alternative set by hand would stay
# wherever the newly installed package put it; so this script records where each link
# points before installing MPICH and puts back any that moved. The repository itself
# only ever calls the explicit names (`mpicc.openmpi`, `mpirun.openmpi`, `*.mpich`).
set -euo pipefail

with_mpich=0
for a in "$@"; do
  case "$a" in
    --with-mpich) with_mpich=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install-mpi.sh: unknown option $a (--with-mpich)" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
updated=0
apt_install() {
  if [ "$updated" = 0 ]; then $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq; updated=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

if ! { command -v mpirun.openmpi >/dev/null || command -v mpirun >/dev/null; } \
  || ! { command -v mpicc.openmpi >/dev/null || command -v mpicc >/dev/null; }; then
  echo "== installing Open MPI (openmpi-bin libopenmpi-dev) from Debian"
  apt_install openmpi-bin libopenmpi-dev
fi
command -v mpirun >/dev/null
# gfortran, for Spools' Fortran layer and its tests (Open MPI's mpifort pulls it in too).
if ! command -v gfortran >/dev/null; then
  echo "== installing gfortran from Debian"
  apt_install gfortran
fi
# The PMIx header and pkg-config, for the test of the PMIx structures Spools passes to
# libpmix (crates/spools-boot/tests/pmix_abi.rs).
if ! pkg-config --exists pmix 2>/dev/null; then
  echo "== installing pkgconf and libpmix-dev from Debian"
  apt_install pkgconf libpmix-dev
fi

[ "$with_mpich" = 1 ] || exit 0
if command -v mpicc.mpich >/dev/null && command -v mpirun.mpich >/dev/null; then
  exit 0
fi

# Where every MPI alternative points now (name value), to put back what the install moves.
alternatives() {
  for name in $(update-alternatives --get-selections 2>/dev/null | awk '$1 ~ /^mpi/ {print $1}'); do
    printf '%s %s\n' "$name" "$(readlink -f "/etc/alternatives/$name" 2>/dev/null || true)"
  done
}
before="$(alternatives)"
echo "== installing MPICH (mpich libmpich-dev) from Debian, for the peer benchmarks"
apt_install mpich libmpich-dev
while read -r name target; do
  [ -n "$name" ] && [ -n "$target" ] || continue
  now="$(readlink -f "/etc/alternatives/$name" 2>/dev/null || true)"
  if [ "$now" != "$target" ]; then
    echo "== putting the $name alternative back to $target (the install moved it to $now)"
    $SUDO update-alternatives --set "$name" "$target" >/dev/null
  fi
done <<<"$before"
command -v mpicc.mpich >/dev/null && command -v mpirun.mpich >/dev/null
echo "== MPICH: $(command -v mpirun.mpich); mpirun is still $(readlink -f "$(command -v mpirun)")"
