#!/usr/bin/env bash
# Fuzzes every target in fuzz/fuzz_targets with libFuzzer for SECONDS each (default 600):
#   spec       the layout spec parser and the layout queries (spools-map)
#   am         the active-message header decoder (spools-proto)
#   boot       the bootstrap framing, both directions (spools-proto)
#   handshake  both sides of the connection handshake (spools-proto)
#   io         pipe frames, .npy headers, striped-file manifests, exchange descriptors,
#              Zarr metadata, shards and chunks (spools-io)
#   msg        the message protocol's request-to-send payloads and argument words (spools-msg)
#   launcher   `spools run`'s command line, a launcher's environment (identity, config)
#   stream     stream frames and the framebuffer protocol's frame header (spools-proto)
#   coll_table the table of a v collective's package of blocks (spools-coll)
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (no TARGET: all of them, one after another)
# Needs a nightly toolchain (installed here through rustup if missing) and cargo-fuzz.
# Each target starts from fuzz/corpus/<target> and fuzz/seeds/<target>; findings land in
# fuzz/artifacts/<target>; reproduce one with
#   cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-600}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(spec am boot handshake io msg launcher stream coll_table)
fi
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target" "seeds/$target"
  echo "== fuzzing $target for ${seconds}s" >&2
  cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096
done
