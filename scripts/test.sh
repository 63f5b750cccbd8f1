#!/usr/bin/env bash
# The test command: formatting, lints, every test (unit, integration, property, doc,
# multi-process) and the docs. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    rustup component add "$component"
  fi
done

# The multi-process tests run the same program under Open MPI's mpirun (Debian's
# openmpi-bin). Install it when missing; with SPOOLS_REQUIRE_MPI=1 (CI) its absence fails
# the test instead of skipping it.
bash scripts/install-mpi.sh || echo "warning: could not install Open MPI; the mpirun test will say so"
bash scripts/install-slurm.sh || echo "warning: could not install Slurm; the Slurm test will say so (a failure with SPOOLS_REQUIRE_SLURM=1)"
# The multi-host tests (network namespaces, packet loss) need iproute2 and nftables.
bash scripts/install-net-tools.sh || echo "warning: could not install iproute2/nftables; the multi-host tests will say so"
# HDF5 files: libhdf5, which spools-io loads at run time (the HDF5 tests need it).
bash scripts/install-hdf5.sh
# libfabric (libfabric1, and fi_info from libfabric-bin), which spools-fabric loads at run
# time: the transport, active-message, message, collective, watchdog and multi-host tests
# run again over its tcp;ofi_rxm and shm providers (SPOOLS_TEST_OFI=0 skips them; with
# SPOOLS_REQUIRE_OFI=1, CI, their absence fails).
bash scripts/install-libfabric.sh || echo "warning: could not install libfabric; the libfabric tests will say so"

echo "== cargo fmt --check (the workspace, and fuzz/, which is outside it)"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
echo "== Structure: no import cycle between files beyond scripts/file-cycles.allow (which only shrinks), the map's crate table against cargo metadata, Config::load only where a program starts"
python3 scripts/tests/test_file_cycles.py
python3 scripts/file-cycles.py
python3 scripts/check-map.py
python3 scripts/check-config.py
echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo clippy per crate (each crate's library and programs, clippy's default targets, alone, as a user building one crate gets them: features are not unified with the other crates', so a crate that leans on a feature another crate turns on fails here; its tests, which take dev-dependencies, are checked above)"
for crate in $(cargo metadata --no-deps --format-version 1 --locked \
    | python3 -c 'import json, sys; print(" ".join(sorted(p["name"] for p in json.load(sys.stdin)["packages"])))'); do
  cargo clippy -p "$crate" --locked -q -- -D warnings
done
echo "== cargo check of the fuzz targets (fuzz/ is outside the workspace; scripts/fuzz.sh runs them)"
cargo check --manifest-path fuzz/Cargo.toml --locked --all-targets
echo "== Model checks under loom: the shared-memory ring's protocol, the futex sleep and wake-up handshake, the shared heap's segment protocol (crates/spools-fabric/src/shm/ring_model.rs, shm/futex_model.rs, crates/spools-heap/src/segment_model.rs; cargo test runs them too)"
cargo test --workspace --locked --lib -q -- shm::ring_model shm::futex_model segment_model
echo "== Model checks under loom, release build: the collective trees' flag lines with cell reuse and credits, and coll/sm's data slot and inline cell reuse (crates/spools-coll/tests/lines_model.rs, slots_model.rs; minutes each in a debug build)"
# Each model in a process of its own, two at a time: loom maps and unmaps a stack for
# every modelled thread of every execution, and models run as threads of one test process
# pay for each other's TLB shootdowns (the same models took 3.4 times the CPU time so).
models=$(cargo test --release --locked -q -p spools-coll --test lines_model --test slots_model \
  --no-run --message-format=json \
  | python3 -c 'import json, sys; [print(m["executable"]) for m in map(json.loads, sys.stdin) if m.get("executable")]')
[ "$(echo "$models" | wc -w)" = 2 ] || { echo "the two loom model programs were not built"; exit 1; }
for exe in $models; do
  "$exe" --list --format terse | sed -n "s|^\(.*\): test\$|$exe \1|p"
done > target/loom-models.txt
xargs -P 2 -L 1 sh -c '"$0" --exact "$1" --quiet --test-threads 1 >/dev/null 2>&1 || { echo "model $1 failed:"; "$0" --exact "$1" --test-threads 1; exit 255; }' \
  < target/loom-models.txt
echo "$(wc -l < target/loom-models.txt) models passed"
echo "== Miri: the pure crates' unit tests, the wire vectors and the stream reassembly (spools-stream's unsafe ADU buffers), on a pinned nightly (scripts/miri.sh)"
bash scripts/miri.sh
echo "== cargo test (unit, integration, property, doc and multi-process tests)"
cargo test --workspace --locked
echo "== The single-threaded path: the transport, active-message, message, collective, progress, idle-CPU and watchdog tests again at thread level single (no lock; SPOOLS_TEST_THREAD_LEVEL sets every job's SPOOLS_THREAD_LEVEL)"
# --workspace, as above, so that every artifact of the first pass is reused.
SPOOLS_TEST_THREAD_LEVEL=single cargo test --workspace --locked \
  --test conformance --test flood --test wake --test heap --test am \
  --test p2p --test coll --test coll_sm --test coll_mismatch --test coll_slice_op \
  --test nonblocking --test pinned --test wait --test watchdog --test leave
echo "== Python: build the spools package into target/py-venv, run its pytest suite"
bash scripts/test-python.sh
echo "== Formats: Zarr arrays, HDF5 files and .npy files against zarr-python, h5py and numpy (target/py-venv)"
bash scripts/test-formats.sh
echo "== Conformance: clients written from docs/streams.md and docs/view.md alone (Python) against spools send, recv, a job's streams and spools view"
bash scripts/test-conformance.sh
echo "== Live view: spools view and demo jobs in headless Chromium (Debian's chromium and chromium-driver, Selenium in target/py-venv)"
bash scripts/test-view.sh
echo "== C: install libspools, spools.h and spools.pc into target/c-prefix, compile the C tests with cc through pkg-config, run them"
bash scripts/test-c.sh
echo "== MPI: libmpi_abi.so.1 (the MPI 5.0 standard ABI) with C programs built by mpicc_abi (PyPI's mpich wheel in target/mpi-venv) under spools run, and its constants against the wheel's mpi_abi.h"
bash scripts/test-mpi.sh
echo "== MPI: mpi4py's own test suite on Spools with 1, 2 and 3 ranks (mpi4py 4.1.2 built against the ABI into target/mpi-venv; skips in crates/spools-mpi/tests/mpi4py-skip.txt)"
bash scripts/test-mpi4py.sh
echo "== MPI: MPICH's own test suite (test/mpi of Debian's MPICH 4.0.2 source package, built by mpicc_abi and Spools' mpifort into target/mpich-test) on Spools: coll, pt2pt, rma, io, datatype, comm, group, topo, attr, errhan, info, init, part, f77, f90; what does not pass is listed, with why, in crates/spools-mpi/tests/mpich-known.txt"
bash scripts/test-mpich.sh
echo "== cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
