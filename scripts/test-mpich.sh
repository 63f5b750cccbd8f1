#!/usr/bin/env bash
# MPICH's own test suite (test/mpi of Debian's source package of MPICH 4.0.2) on Spools'
# libmpi_abi.so.1: fetched with `apt-get source` (a deb-src entry is made from the
# machine's own Debian entry), configured and built with mpicc_abi (PyPI's mpich wheel, in
# target/mpi-venv) and, for f77/ and f90/, Spools' own mpifort into target/mpich-test,
# every entry of each directory's testlist run under `spools run` with its process count,
# and the results checked against crates/spools-mpi/tests/mpich-known.txt: the check fails
# when a test off that list does not pass, or a listed one passes (take it off).
# scripts/mpich-suite.py is the runner.
#
#   bash scripts/test-mpich.sh                 # the directories of the test command
#   MPICH_DIRS=all bash scripts/test-mpich.sh  # every C directory but ft, and
#                                              # the entries listed as slow
#   MPICH_PEER=1 bash scripts/test-mpich.sh    # also on MPICH's own libmpi_abi.so.1,
#                                              # and the table "passes on MPICH, not on
#                                              # Spools" per directory
#   MPICH_ONLY=comm/idup,coll/ic bash scripts/test-mpich.sh   # some entries (no check)
set -euo pipefail
cd "$(dirname "$0")/.."

version=4.0.2
deb_version=4.0.2-3
root="$(pwd)/target/mpich-test"
src="$root/mpich-$version/test/mpi"
build="$root/build"
known="crates/spools-mpi/tests/mpich-known.txt"
default_dirs=coll,pt2pt,rma,io,datatype,comm,group,topo,attr,errhan,info,init,part,spawn,f77,f90
all_dirs=$default_dirs,mpi_t,errors,impls,threads
case "${MPICH_DIRS:-}" in
  "") dirs=$default_dirs ;;
  all) dirs=$all_dirs ;;
  *) dirs=$MPICH_DIRS ;;
esac
# An entry's limit unless its testlist gives one: 180 s, MPICH's own runtests' default.
# The slowest entries that pass take about 10 s on an idle 2-core machine and passed 60 s
# beside another test run and a CPU-bound process (f77/io/writeallf: 24,000 collective
# accesses of one integer each at 4 ranks); a hang still ends.
per_test_limit="${MPICH_TIMEOUT:-180}"

source scripts/mpi-abi-env.sh

# The source: Debian's package, pinned (the suite's expectations are this version's).
if [ ! -f "$src/configure" ]; then
  mkdir -p "$root/dl"
  if ! ls "$root"/dl/mpich_"$version".orig.tar.* >/dev/null 2>&1; then
    list=/etc/apt/sources.list.d/spools-deb-src.sources
    if [ ! -f "$list" ]; then
      if [ "$(id -u)" != 0 ] || [ ! -f /etc/apt/sources.list.d/debian.sources ]; then
        echo "test-mpich: MPICH's source needs a deb-src entry; run as root on Debian" >&2
        exit 1
      fi
      sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$list"
      apt-get -o DPkg::Lock::Timeout=600 update -qq
    fi
    (cd "$root/dl" && apt-get source -qq --download-only "mpich=$deb_version")
  fi
  tar -xf "$root"/dl/mpich_"$version".orig.tar.* -C "$root" "mpich-$version/test/mpi"
fi

# Spools' library, and its Fortran layer and mpifort, which the Fortran tests are built by.
cargo build --locked -q -p spools-cli
make --no-print-directory -s -C crates/spools-mpi PROFILE=debug >/dev/null
spools="$(pwd)/target/debug/spools"
mpifort="$(pwd)/target/debug/mpifort"
test -x "$mpifort" || { echo "test-mpich: no $mpifort (is gfortran installed?)" >&2; exit 1; }

# Configured and built with mpicc_abi and Spools' mpifort: the programs link against the
# standard ABI (and the Fortran layer, which calls nothing else), so the same binaries run
# on Spools' library and on MPICH's. A build configured before the Fortran and spawn
# tests were part of it is configured again.
if [ -f "$build/Makefile" ] && [ ! -f "$build/.spawn" ]; then
  rm -rf "$build"
fi
if [ ! -f "$build/Makefile" ]; then
  mkdir -p "$build"
  (cd "$build" && CC="$mpicc_abi" MPICC="$mpicc_abi" F77="$mpifort" MPIF77="$mpifort" \
    FC="$mpifort" MPIFC="$mpifort" "$src/configure" -q \
    --enable-fortran=f77,f90 --disable-cxx --enable-romio --disable-ft-tests \
    --disable-perftest > configure.log 2>&1) || { tail -20 "$build/configure.log"; exit 1; }
  touch "$build/.spawn"
fi
for d in util dtpools; do
  make -s -C "$build/$d" -j2 >"$build/make-$d.log" 2>&1 || { tail -20 "$build/make-$d.log"; exit 1; }
done
for d in ${dirs//,/ }; do
  # -k: a test the standard ABI's header cannot compile (MPI_Fint, the removed MPI-1
  # calls) is reported as not built, and the others are built.
  make -s -k -C "$build/$d" -j2 >"$build/make-$d.log" 2>&1 || true
done

only=()
tag=""
if [ -n "${MPICH_ONLY:-}" ]; then only=(--only "$MPICH_ONLY"); tag="-only"; fi
slow=()
if [ "${MPICH_DIRS:-}" = all ]; then slow=(--run-slow); fi
# Two entries at once (never two of one directory; MPICH_JOBS=1 for one at a time): most
# of an entry's time is launching and waiting, not computing.
python3 scripts/mpich-suite.py run --build "$build" --src "$src" --dirs "$dirs" \
  --jobs "${MPICH_JOBS:-2}" --spools "$spools" --timeout "$per_test_limit" --out "$root/spools$tag.tsv" \
  --known "$known" "${slow[@]}" "${only[@]}"
if [ "${MPICH_PEER:-0}" = 1 ]; then
  python3 scripts/mpich-suite.py run --launcher mpich --mpiexec "$mpi_venv/bin/mpiexec" \
    --build "$build" --src "$src" --dirs "$dirs" --timeout "$per_test_limit" \
    --out "$root/mpich$tag.tsv" "${only[@]}"
  python3 scripts/mpich-suite.py table --spools "$root/spools$tag.tsv" --mpich "$root/mpich$tag.tsv" \
    --known "$known"
fi
if [ -z "${MPICH_ONLY:-}" ]; then
  python3 scripts/mpich-suite.py check --results "$root/spools.tsv" --known "$known"
fi
