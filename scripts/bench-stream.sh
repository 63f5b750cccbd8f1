#!/usr/bin/env bash
# The stream benchmarks (`spools bench stream`), release build, beside iperf3 on loopback
# (installed from Debian by scripts/install-iperf3.sh when missing): the links part from 4
# ranks (K = 1, 2, 4, 8 links; TU 64 KiB .. 4 MiB), then the cyclic part (Figure 15) and
# the group part (four lock-step streams of 1080p RGB frames) on 8 ranks. Medians of RUNS
# alternating runs (default 5). Writes links.json, cyclic.json (with the group part), a
# summary table and the plots (stream.svg, stream-cyclic.svg) to OUT.
#
#   bash scripts/bench-stream.sh [--runs N] [--out DIR] [--quick] [-- EXTRA bench OPTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=5
OUT=target/bench-stream
QUICK=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=(--quick); shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--runs N] [--out DIR] [--quick] [-- EXTRA OPTIONS]" >&2; exit 2 ;;
  esac
done
bash scripts/install-iperf3.sh
cargo build --release -q -p spools-cli
S=$(pwd)/target/release/spools
mkdir -p "$OUT"
echo "== links: one stream from 4 ranks to spools recv, against iperf3 -P 1 and -P K"
$S run -n 4 --timeout 3600 -- $S bench stream --parts links --reps "$RUNS" "${QUICK[@]}" \
  --plot "$OUT/stream.svg" --json "$@" > "$OUT/links.json"
echo "== cyclic: u8 cyclic(b) on 8 reshuffled, against raw streaming (Figure 15);"
echo "== group: four lock-step streams of 1080p RGB frames from 8 ranks (frames/s, skew)"
$S run -n 8 --timeout 3600 -- $S bench stream --parts cyclic,group --reps "$RUNS" "${QUICK[@]}" \
  --plot "$OUT/stream.svg" --json "$@" > "$OUT/cyclic.json"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
lines = []
l = json.load(open(f"{out}/links.json"))["links"]
lines.append(f"links: {l['adus']} ADUs of {l['adu_bytes']} bytes held block on {l['holders']}")
lines.append("| K | TU | stream MB/s | x iperf3 -P 1 | x iperf3 -P K |")
lines.append("|---|---|---|---|---|")
for p in l["points"]:
    lines.append(f"| {p['links']} | {p['tu']} | {p['stream']['mb_per_s']:.0f} | {p['vs_iperf3_1']:.2f} | {p['vs_iperf3_k']:.2f} |")
for i in l["iperf3"]:
    lines.append(f"| iperf3 -P {i['streams']} | | {i['mb_per_s']:.0f} | | |")
c = json.load(open(f"{out}/cyclic.json"))["cyclic"]
lines.append("")
lines.append(f"cyclic: {c['adus']} ADUs of {c['adu_bytes']} bytes on {c['ranks']} ranks and links")
lines.append("| b | reshuffled MB/s | raw MB/s | reshuffled / raw time |")
lines.append("|---|---|---|---|")
for p in c["points"]:
    lines.append(f"| {p['block']} | {p['reshuffled']['mb_per_s']:.0f} | {p['raw']['mb_per_s']:.0f} | {p['ratio']:.2f} |")
g = json.load(open(f"{out}/cyclic.json"))["group"]
lines.append("")
lines.append(f"group: {g['streams']} lock-step streams, {g['frames']} frames of {g['frame_bytes']} bytes from {g['ranks']} ranks over {g['links']} links")
lines.append("| frames/s of the group | MB/s | skew |")
lines.append("|---|---|---|")
lines.append(f"| {g['frames_per_s']:.1f} | {g['timing']['mb_per_s']:.0f} | {g['skew']} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
