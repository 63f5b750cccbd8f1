#!/usr/bin/env bash
# libfabric between hosts on one machine (bench/cluster/hosts.sh: network namespaces over
# veth): Spools over libfabric's tcp provider (`tcp;ofi_rxm`) against Spools' own TCP, a
# raw TCP ping-pong, `fi_pingpong` on the same provider, and Open MPI (its ofi MTL on the
# same provider, and its own TCP).
#
# Usage: bench/cluster/ofi.sh [--runs N] [--out DIR] [--loss PCT]
#
#   --runs N      rounds, interleaved so that drift hits every program alike (default 3);
#                 the summary takes medians
#   --out DIR     JSON documents, logs and summary.md (default target/bench-ofi)
#   --loss PCT    drop PCT % of the packets entering host h2 (nftables); the rounds then
#                 run the collectives only (they check their values; the ping-pongs'
#                 fixed counts take minutes under loss)
#
# Needs root (namespaces). Installs Open MPI, libfabric (fi_pingpong) and nftables from
# Debian when missing. Per round, one rank on each host: the raw ping-pong
# (bench/cluster/netpp.c, 8 B and 1 MiB); fi_pingpong -p 'tcp;ofi_rxm' -e rdm (8 B, 1 MiB);
# `spools bench pingpong --api tagged` and `--api am` (memory messages: one-sided writes
# over libfabric) with SPOOLS_TRANSPORT=tcp and =ofi; Open MPI's bench/peers/pingpong.c
# with `--mca pml cm --mca mtl ofi` and with its TCP BTL; then `spools bench coll` with
# 2 hosts x 2 ranks over both networks.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=3
out="$root/target/bench-ofi"
loss=0
rate=0
prov="tcp;ofi_rxm"
while (($# > 0)); do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "ofi.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "ofi.sh: --runs needs a positive count" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "ofi.sh: needs root (network namespaces)" >&2; exit 2; }

bash "$root/scripts/install-mpi.sh"
bash "$root/scripts/install-libfabric.sh"
if [ "$loss" != 0 ] && ! command -v nft >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null
fi
mkdir -p "$out/logs" "$out/bin"
(cd "$root" && cargo build --release -q -p spools-cli)
S="$root/target/release/spools"
mpicc.openmpi -O2 -o "$out/bin/pingpong" "$root/bench/peers/pingpong.c"
cc -O2 -o "$out/bin/netpp" "$here/netpp.c"

# shellcheck source=bench/cluster/hosts.sh
source "$here/hosts.sh"

# fi_pingpong SIZE ITERATIONS: server on h2, client on h1; prints the client's table.
fipp() {
    ip netns exec "$P-h2" timeout 120 fi_pingpong -p "$prov" -e rdm -S "$1" -I "$2" -B 47600 \
        > /dev/null 2>&1 &
    local server=$!
    # The server listens on its control port; the client retries until it answers.
    local i
    for i in $(seq 50); do
        if ip netns exec "$P-h1" timeout 120 fi_pingpong -p "$prov" -e rdm -S "$1" -I "$2" \
            -P 47600 "$h2ip" 2> /dev/null; then
            break
        fi
        sleep 0.1
    done
    wait "$server" || true
}
# over NET (tcp or ofi): the mpirun options that choose Spools' network between hosts.
over() {
    if [ "$1" = tcp ]; then
        env=(-x SPOOLS_TRANSPORT=tcp)
    else
        env=(-x SPOOLS_TRANSPORT=ofi -x "SPOOLS_OFI_PROVIDER=$prov")
    fi
}
for r in $(seq "$runs"); do
    echo "== round $r of $runs"
    if [ "$loss" = 0 ]; then
        ip netns exec "$P-h2" "$out/bin/netpp" serve 5301 &
        sleep 0.2
        ip netns exec "$P-h1" "$out/bin/netpp" "$h2ip" 5301 8 1048576 > "$out/netpp.run$r.json"
        wait
        { fipp 8 20000; fipp 1048576 1000; } > "$out/fi_pingpong.run$r.txt"
        for net in tcp ofi; do
            over "$net"
            mpi 2 1 "${env[@]}" "$S" bench pingpong --api tagged --json --sizes 8,1M \
                > "$out/tagged-$net.run$r.json" 2> "$out/logs/tagged-$net.run$r.log"
            mpi 2 1 "${env[@]}" "$S" bench pingpong --api am --json --sizes 8,1M \
                > "$out/am-$net.run$r.json" 2> "$out/logs/am-$net.run$r.log"
        done
        mpi 2 1 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov" \
            "$out/bin/pingpong" 8 1M \
            > "$out/mpi-ofi.run$r.json" 2> "$out/logs/mpi-ofi.run$r.log" || true
        mpi 2 1 --mca pml ob1 --mca btl tcp,self "$out/bin/pingpong" 8 1M \
            > "$out/mpi-tcp.run$r.json" 2> "$out/logs/mpi-tcp.run$r.log"
    fi
    for net in tcp ofi; do
        over "$net"
        mpi 4 2 "${env[@]}" "$S" bench coll --json --ops allreduce,bcast --sizes 8,4K,256K,4M \
            > "$out/coll-$net.run$r.json" 2> "$out/logs/coll-$net.run$r.log"
    done
done
python3 "$here/summarize-ofi.py" "$out" "$runs" "loss=$loss%" | tee "$out/summary.md"
