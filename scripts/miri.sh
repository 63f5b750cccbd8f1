#!/usr/bin/env bash
# Miri over the code that runs without I/O: the pure crates' unit tests (spools-map,
# spools-proto), the wire-format vectors, and the stream reassembly of spools-stream, whose
# ADU buffers (`adubuf.rs`) are its unsafe code. Miri interprets each test and fails it on
# undefined behaviour: a read out of bounds, a use after free, an aliasing violation, a
# data race. scripts/test.sh runs it.
#
#   bash scripts/miri.sh
#
# Miri needs a nightly toolchain; the one named below (pinned, so that a new nightly cannot
# break the test command) is installed through rustup when missing. Miri is some thousand
# times slower than a native run: property tests run 2 cases here (their full runs are in
# `cargo test`), and the unit tests that enumerate large layouts by brute force are left to
# the native run.
set -euo pipefail
cd "$(dirname "$0")/.."

toolchain=nightly-2026-10-30
# One install at a time: two test runs on one machine installing the same toolchain at
# once broke each other's (rustup removes a partial install it finds).
mkdir -p "${RUSTUP_HOME:-$HOME/.rustup}"
(
  flock 9
  if ! rustup run "$toolchain" cargo miri --version >/dev/null 2>&1; then
    rustup toolchain install "$toolchain" --profile minimal --component miri --component rust-src
  fi
) 9>"${RUSTUP_HOME:-$HOME/.rustup}/spools-miri-install.lock"
cargo "+$toolchain" miri setup >/dev/null

# Isolation off: proptest reads its regression files. 2 cases a property.
export MIRIFLAGS="-Zmiri-disable-isolation"
export PROPTEST_CASES=2 SPOOLS_PROPTEST_CASES=2
miri() { cargo "+$toolchain" miri test --locked -q "$@"; }

miri -p spools-proto --lib
miri -p spools-proto --test wire_vectors
miri -p spools-map --lib -- --skip counts_match_enumeration --skip matches_brute_force \
  --skip repeated_body_and_long_tail_are_held_once
miri -p spools-stream --test doc_vectors
miri -p spools-stream --test reassembly
