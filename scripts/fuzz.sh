#!/usr/bin/env bash
# Fuzzes the spec parser and the layout queries with libFuzzer for SECONDS (default 600).
# Needs a nightly toolchain (installed here through rustup if missing) and cargo-fuzz.
# Findings land in fuzz/artifacts/spec; reproduce one with
#   cargo +nightly fuzz run spec fuzz/artifacts/spec/<file>
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-600}"
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
mkdir -p corpus/spec
exec cargo +nightly fuzz run spec corpus/spec seeds/spec -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096
