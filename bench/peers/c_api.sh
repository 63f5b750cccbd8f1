#!/usr/bin/env bash
# The C interface's cost, measured: the ping-pong and token ring ported to spools.h
# (spools_pingpong.c, spools_ring.c) run side by side with the same programs on MPI
# (pingpong.c, ring.c under Open MPI's mpirun) and on Spools' Rust API (the twin
# crates/spools-c/examples/pingpong_rs.rs, `spools bench pingpong --api tagged`, and
# `spools bench ring`, whose ring uses active messages).
#
# Usage: bench/peers/c_api.sh [--runs N] [--out DIR]
#
#   --runs N   rounds of the whole set, interleaved (default 7); medians over them
#   --out DIR  where the programs, JSON documents, logs and summary go
#              (default target/bench-c-api)
#
# Steps: install Open MPI (scripts/install-mpi.sh) if missing; build the release library
# and install it into DIR/prefix (make -C crates/spools-c install); compile the C ports
# with cc -O2 through pkg-config and the MPI programs with mpicc -O2; build the release
# `spools` and pingpong_rs; then N rounds, each running, for 8 B and 1 MiB ping-pongs
# over shared memory: pingpong_rs (Rust), spools_pingpong (C), `spools bench pingpong
# --api tagged` and Open MPI's pingpong; and the 8-byte token ring on 2 and 4 ranks for
# the C port, Open MPI and `spools bench ring`. summary.md gets the medians and the
# ratios C/Rust and C/MPI.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=7
out=""
while (($# > 0)); do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "c_api.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
out=${out:-$root/target/bench-c-api}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
cd "$root"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    bash scripts/install-mpi.sh >&2
fi
mpicc_ompi=$(command -v mpicc.openmpi || echo mpicc)
mpirun_ompi=$(command -v mpirun.openmpi || echo mpirun)
mpirun=("$mpirun_ompi" --allow-run-as-root --oversubscribe)

echo "building (release) ..." >&2
cargo build --release --locked -p spools-cli >&2
cargo build --release --locked -p spools-c --example pingpong_rs >&2
make --no-print-directory -C crates/spools-c install PREFIX="$out/prefix" >/dev/null
export PKG_CONFIG_PATH="$out/prefix/lib/pkgconfig"
for p in spools_pingpong spools_ring; do
    # shellcheck disable=SC2046
    cc -std=c99 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -o "$out/$p" "$here/$p.c" \
        $(pkg-config --cflags --libs spools)
done
for p in pingpong ring; do
    "$mpicc_ompi" -O2 -Wall -Wextra -o "$out/$p" "$here/$p.c"
done
spools="$root/target/release/spools"
rs="$root/target/release/examples/pingpong_rs"

# run NAME CMD...: keep the last line of CMD's stdout that is a JSON document.
run() {
    local name=$1
    shift
    printf '  %-28s' "$name" >&2
    if ! "$@" >"$out/logs/$name.stdout" 2>"$out/logs/$name.log"; then
        echo FAILED >&2
        cat "$out/logs/$name.log" >&2
        exit 1
    fi
    grep '^{' "$out/logs/$name.stdout" | tail -n1 >"$out/$name.json"
    echo ok >&2
}

rm -f "$out"/*.run*.json
for ((i = 1; i <= runs; i++)); do
    echo "run $i of $runs" >&2
    run "pp-rust.run$i" "$spools" run -n 2 -- "$rs" 8 1M
    run "pp-c.run$i" "$spools" run -n 2 -- "$out/spools_pingpong" 8 1M
    run "pp-bench.run$i" "$spools" run -n 2 -- "$spools" bench pingpong --api tagged --json --sizes 8,1M
    run "pp-mpi.run$i" "${mpirun[@]}" -n 2 "$out/pingpong" 8 1M
    for n in 2 4; do
        run "ring-c-n$n.run$i" "$spools" run -n "$n" -- "$out/spools_ring"
        run "ring-mpi-n$n.run$i" "${mpirun[@]}" -n "$n" "$out/ring"
        run "ring-bench-n$n.run$i" "$spools" run -n "$n" -- "$spools" bench ring --json
    done
done

python3 - "$out" "$runs" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def load(name):
    return [json.load(open(f"{out}/{name}.run{i}.json")) for i in range(1, runs + 1)]
def pp(name, size):
    vals = []
    for d in load(name):
        for p in d["series"][0]["points"]:
            if p["bytes"] == size:
                vals.append(p["latency_us"])
    return statistics.median(vals)
def ring(name):
    return statistics.median(d["hop_us"] for d in load(name))
print(f"# The C interface beside Rust and Open MPI (medians of {runs} interleaved runs)\n")
print("| one-way latency, shm | Rust twin | C API | C - Rust | C / Rust | spools bench (Rust) | Open MPI | C / Open MPI |")
print("|---|---|---|---|---|---|---|---|")
for size, label in ((8, "8 B"), (1 << 20, "1 MiB")):
    r, c, b, m = (pp(n, size) for n in ("pp-rust", "pp-c", "pp-bench", "pp-mpi"))
    print(f"| {label} | {r:.3f} us | {c:.3f} us | {(c - r) * 1000:+.0f} ns | {c / r:.3f} | {b:.3f} us | {m:.3f} us | {c / m:.3f} |")
print("\n| token ring, time per hop | C API | Open MPI | spools bench ring (AM) | C / Open MPI |")
print("|---|---|---|---|---|")
for n in (2, 4):
    c, m, b = ring(f"ring-c-n{n}"), ring(f"ring-mpi-n{n}"), ring(f"ring-bench-n{n}")
    print(f"| {n} ranks | {c:.3f} us | {m:.3f} us | {b:.3f} us | {c / m:.3f} |")
PY
