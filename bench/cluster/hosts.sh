# Sourced by bench/cluster/run.sh and bench/cluster/ofi.sh (which set `out`, `loss` and
# `rate`): two hosts h1 and h2 on this machine, network namespaces P-h1 and P-h2 joined by
# veth pairs to a bridge P-br, each process started in its namespace under its own host
# name (a UTS namespace). Defines `mpi NP PER_HOST PROGRAM ARGS...` (one `mpirun
# --hostfile` across both hosts whose rsh agent enters the namespace), `h1ip`, `h2ip`,
# and removes every namespace, veth, bridge and process on exit, however the script ends.

# The hosts: bridge P-br 10.N.0.1/24 in the root namespace, namespaces P-h1, P-h2 at .2, .3.
P="sc$$"
net="10.$((200 + $$ % 50)).$(($$ / 50 % 250))"
cleanup() {
    pkill -f "$out/bin/netpp" 2>/dev/null || true
    for i in 1 2; do ip netns pids "$P-h$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
    for i in 1 2; do ip netns del "$P-h$i" 2>/dev/null || true; done
    ip link del "$P-br" 2>/dev/null || true
}
trap cleanup EXIT
ip link add "$P-br" type bridge
ip addr add "$net.1/24" dev "$P-br"
ip link set "$P-br" up
for i in 1 2; do
    ip netns add "$P-h$i"
    ip link add "$P-v$i" type veth peer name eth0 netns "$P-h$i"
    ip link set "$P-v$i" master "$P-br" up
    ip -n "$P-h$i" addr add "$net.$((i + 1))/24" dev eth0
    ip -n "$P-h$i" link set eth0 up
    ip -n "$P-h$i" link set lo up
    ip -n "$P-h$i" route add default via "$net.1"
done
if [ "$loss" != 0 ]; then
    ip netns exec "$P-h2" nft add table inet spools
    ip netns exec "$P-h2" nft add chain inet spools in '{ type filter hook input priority 0; }'
    ip netns exec "$P-h2" nft add rule inet spools in iifname eth0 numgen random mod 100 '<' "$loss" drop
fi
if [ "$rate" != 0 ]; then
    ip netns exec "$P-h1" tc qdisc add dev eth0 root tbf rate "${rate}mbit" burst 256kb latency 50ms
fi
agent="$out/bin/agent"
cat > "$agent" <<AGENT
#!/bin/sh
# mpirun's rsh agent: AGENT HOST CMD... runs CMD in namespace $P-HOST under host name HOST.
host=\$1; shift
exec ip netns exec "$P-\$host" unshare --uts sh -c "hostname \$host; \$*"
AGENT
chmod +x "$agent"
printf 'h1 slots=2\nh2 slots=2\n' > "$out/bin/hosts"
# --bind-to none: every "host" sees the same cores, and Open MPI's default binding would
# put the first rank of each host on the same core (seen: 4 ms per message, a scheduler
# tick, for Open MPI and 300 us for Spools).
mpi() { # NP PER_HOST PROGRAM ARGS...: a job across the two hosts
    local np=$1 per=$2; shift 2
    timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --hostfile "$out/bin/hosts" \
        -n "$np" --map-by "ppr:$per:node" --bind-to none --mca plm_rsh_agent "$agent" \
        --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 "$@"
}
h1ip="$net.2"
h2ip="$net.3"
