#!/usr/bin/env bash
# The links and the receiver alone, no job: `spools send` to `spools recv --out /dev/null`
# on loopback, a 512 MiB file in ADUs of 16 MiB and TUs of 4 MiB, over 1 and 4 links, in
# RUNS runs (default 5) alternating with iperf3 moving as many bytes with 1 and 4 parallel
# streams (installed from Debian by scripts/install-iperf3.sh when missing). Prints every
# run's MB/s and the medians' ratios.
#
#   bash scripts/bench-send-recv.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
bash scripts/install-iperf3.sh
cargo build --release -q -p spools-cli
S=$(pwd)/target/release/spools
DIR=$(mktemp -d /tmp/spools-send-recv.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
head -c 536870912 /dev/urandom > "$DIR/in.bin"
spools() { # LINKS: one transfer, the receiver's MB/s
  "$S" recv tcp:127.0.0.1:0 --out /dev/null --connections 1 2> "$DIR/recv.log" & local rp=$!
  for _ in $(seq 200); do grep -q listening "$DIR/recv.log" 2>/dev/null && break; sleep 0.05; done
  local addr; addr=$(grep -o '127.0.0.1:[0-9]*' "$DIR/recv.log" | head -1)
  "$S" send "$DIR/in.bin" "tcp:$addr" --links "$1" --tu 4MiB --adu 16MiB > /dev/null 2>&1
  wait "$rp"
  grep -o '([0-9.]* MB/s)' "$DIR/recv.log" | tr -d '(MB/s)'
}
iperf() { # STREAMS: iperf3's received MB/s
  iperf3 -s -1 -p 5299 > /dev/null 2>&1 & local sp=$!
  sleep 0.3
  iperf3 -c 127.0.0.1 -p 5299 -n 512M -P "$1" -J | python3 -c \
    "import json,sys; d=json.load(sys.stdin); print(round(d['end']['sum_received']['bits_per_second']/8e6, 1))"
  wait "$sp"
}
for _ in $(seq "$RUNS"); do
  echo "ip1 $(iperf 1)"; echo "s1 $(spools 1)"; echo "ip4 $(iperf 4)"; echo "s4 $(spools 4)"
done | tee "$DIR/runs"
python3 - "$DIR/runs" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, v = line.split()
    d[k].append(float(v))
m = {k: statistics.median(v) for k, v in d.items()}
print(f"medians MB/s: {m}")
print(f"1 link / iperf3 -P 1: {m['s1'] / m['ip1']:.2f}; 4 links / iperf3 -P 4: {m['s4'] / m['ip4']:.2f}")
PY
