#!/usr/bin/env bash
# Between hosts on one machine: network namespaces joined by veth pairs to a bridge, each
# namespace a host with its own name (a UTS namespace per launched process). Spools
# against the limits of the link and against Open MPI across the same namespaces.
#
# Usage: bench/cluster/run.sh [--runs N] [--out DIR] [--loss PCT] [--rate MBIT]
#
#   --runs N      rounds, interleaved so that drift hits every program alike (default 3);
#                 the summary takes medians
#   --out DIR     JSON documents, logs and summary.md (default target/bench-cluster)
#   --loss PCT    drop PCT % of the packets entering host h2 (nftables, `numgen random`)
#   --rate MBIT   limit h1's egress to MBIT Mbit/s (the tbf qdisc)
#
# Needs root (namespaces). Installs Open MPI, iperf3 and nftables from Debian when
# missing. Per round: iperf3 h1 -> h2 (one stream, 512 MiB); a raw TCP ping-pong
# (bench/cluster/netpp.c: 8 B and 1 MiB, busy-polling, TCP_NODELAY); `spools bench
# pingpong --api tagged` and Open MPI's bench/peers/pingpong.c with one rank on each
# host (not with --loss: their fixed counts take minutes under loss); `spools bench coll
# --ops allreduce,bcast` and bench/peers/coll.c with 2 hosts x 2 ranks. Both launched by the same `mpirun --hostfile` whose rsh agent enters the
# namespace (Spools meets through mpirun's PMIx, nothing set). Every namespace, veth,
# bridge and process is removed on exit, however the script ends.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=3
out="$root/target/bench-cluster"
loss=0
rate=0
while (($# > 0)); do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --runs needs a positive count" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network namespaces)" >&2; exit 2; }

bash "$root/scripts/install-mpi.sh"
bash "$root/scripts/install-iperf3.sh"
if [ "$loss" != 0 ] && ! command -v nft >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null
fi
mkdir -p "$out/logs" "$out/bin"
(cd "$root" && cargo build --release -q -p spools-cli)
S="$root/target/release/spools"
mpicc.openmpi -O2 -o "$out/bin/pingpong" "$root/bench/peers/pingpong.c"
mpicc.openmpi -O2 -o "$out/bin/coll" "$root/bench/peers/coll.c"
cc -O2 -o "$out/bin/netpp" "$here/netpp.c"

# The hosts h1 and h2 (namespaces, a bridge, `mpi NP PER_HOST PROGRAM ARGS`).
# shellcheck source=bench/cluster/hosts.sh
source "$here/hosts.sh"
for r in $(seq "$runs"); do
    echo "== round $r of $runs"
    ip netns exec "$P-h2" iperf3 -s -1 -p 5299 > /dev/null 2>&1 &
    sleep 0.3
    ip netns exec "$P-h1" iperf3 -c "$h2ip" -p 5299 -n 512M -J > "$out/iperf3.run$r.json"
    wait
    ip netns exec "$P-h2" "$out/bin/netpp" serve 5301 &
    ip netns exec "$P-h1" "$out/bin/netpp" "$h2ip" 5301 8 1048576 > "$out/netpp.run$r.json"
    wait
    # Under loss, a ping-pong of fixed counts (50000 round trips of 8 B) takes minutes:
    # every lost packet costs a retransmission timeout (200 ms at least). The collectives
    # below are timed in batches of bounded length, and stay.
    if [ "$loss" = 0 ]; then
        mpi 2 1 "$S" bench pingpong --api tagged --json --sizes 8,1M \
            > "$out/pingpong-spools.run$r.json" 2> "$out/logs/pingpong-spools.run$r.log"
        mpi 2 1 "$out/bin/pingpong" 8 1M \
            > "$out/pingpong-mpi.run$r.json" 2> "$out/logs/pingpong-mpi.run$r.log"
    fi
    mpi 4 2 "$S" bench coll --json --ops allreduce,bcast --sizes 8,4K,256K,4M \
        > "$out/coll-spools.run$r.json" 2> "$out/logs/coll-spools.run$r.log"
    mpi 4 2 "$out/bin/coll" --ops allreduce,bcast --sizes 8,4K,256K,4M \
        > "$out/coll-mpi.run$r.json" 2> "$out/logs/coll-mpi.run$r.log"
done
python3 "$here/summarize.py" "$out" "$runs" "loss=$loss% rate=${rate}Mbit" | tee "$out/summary.md"
