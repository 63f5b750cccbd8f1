#!/usr/bin/env bash
# Peer benchmarks: Spools side by side with Open MPI (and the raw limits of the host).
#
# Usage: bench/peers/run.sh [--suite core|msg|all|osu|rma|mpiio] [--runs N] [--out DIR]
#                           [--skip-spools]
#
#   --suite S       which benchmarks: core (the runtime core, below; the default), msg (the
#                   messaging layer: collectives, matrix multiply, tagged ping-pong, overlap),
#                   all (both, in every run), osu (`spools bench osu` beside Open MPI and
#                   MPICH in the OSU micro-benchmarks' format: bench/peers/osu.sh, which takes
#                   these options and more, default 3 runs, output in DIR/osu), rma
#                   (one-sided MPI_Put/Get/Accumulate through the MPI ABI on Spools and MPICH
#                   beside Open MPI: bench/peers/rma.sh, default 3 runs, output in DIR/rma)
#                   or mpiio (MPI-IO: io.c's collective write and read of 128^3 and 512^3
#                   ints through a darray view and, at 128^3, a cyclic(1) view, on Spools
#                   and MPICH through the MPI ABI beside Open MPI's OMPIO and ROMIO:
#                   bench/peers/mpiio.sh, default 3 runs, output in DIR/mpiio)
#   --runs N        rounds of the whole set, interleaved so that drift of the host hits every
#                   program alike (default 5); the summary takes medians over them
#   --out DIR       where the C programs, every JSON document, the logs, the summary and the
#                   SVG plots go (default target/bench-peers under the repository root)
#   --skip-spools   run only the Open MPI and raw programs (no cargo build)
#
# Steps of the core suite: install Open MPI from Debian if mpicc/mpirun are missing; build
# pingpong.c, ring.c, raw.c and init.c with mpicc -O2; build the spools command (cargo build
# --release -p spools-cli); then for each run: the Spools benchmarks with 2 ranks (ping-pong
# over shared memory and over TCP, message rate over both, LogP, idle), Open MPI ping-pong as
# installed, "tuned" (single-copy mechanism off: copy-in/copy-out through shared memory only)
# and over TCP, the raw probes, the token ring with 2 and 8 ranks for both, and the start-up
# of a trivial 2-rank job, launched and torn down 20 times in a row for each launcher (spools
# run with `spools bench init`, mpirun with init.c), timed from outside with date +%s%N.
#
# Steps of the msg suite: the same tools and spools build; build pingpong.c, coll.c and
# matmul.c with mpicc -O2; then for each run: collectives (barrier, bcast, allreduce, alltoall;
# `spools bench coll` against coll.c) with 2, 4 and 8 ranks; the ring-shift matrix multiply
# (`spools bench matmul` against matmul.c) for n = 1024 and 2048 on 1, 2 and 4 ranks;
# ping-pong over shared memory from 8 B to 16 MiB through the tagged API (`spools bench
# pingpong --api tagged`), the active-message API (`spools bench pingpong`) and Open MPI
# (pingpong.c); and communication/computation overlap (`spools bench overlap`) without and
# with the progress thread (SPOOLS_PROGRESS_THREAD=1). The suite all runs both in every run.
# Documents of the msg suite: coll-{spools,mpi}-PN, matmul-{spools,mpi}-nN-PP,
# msg-pingpong-{spools-tagged,spools-am,mpi}, overlap-spools and overlap-spools-thread.
#
# Each document lands in DIR as PROGRAM.runI.json (stderr in DIR/logs/); summarize.py then
# prints Markdown tables (also kept as DIR/summary.md), the goals with PASS/MISS first (the msg
# suite's in its own "Messaging" section), and writes DIR/latency.svg and DIR/bandwidth.svg.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

runs=5
runs_given=""
out=""
skip_spools=0
suite=core

usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
}

while (($# > 0)); do
    case $1 in
    --suite)
        if [[ $# -lt 2 || ! $2 =~ ^(core|msg|all|osu|rma|mpiio)$ ]]; then
            echo "run.sh: --suite needs one of core, msg, all, osu, rma, mpiio" >&2
            exit 2
        fi
        suite=$2
        shift 2
        ;;
    --runs)
        if [[ $# -lt 2 || ! $2 =~ ^[1-9][0-9]*$ ]]; then
            echo "run.sh: --runs needs a positive integer" >&2
            exit 2
        fi
        runs=$2
        runs_given=$2
        shift 2
        ;;
    --out)
        if [[ $# -lt 2 || -z $2 ]]; then
            echo "run.sh: --out needs a directory" >&2
            exit 2
        fi
        out=$2
        shift 2
        ;;
    --skip-spools)
        skip_spools=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "run.sh: unknown argument: $1 (see --help)" >&2
        exit 2
        ;;
    esac
done

# The osu, rma and mpiio suites have scripts of their own.
if [[ $suite == osu ]]; then
    osu_args=(--runs "${runs_given:-3}" --out "${out:-$root/target/bench-peers}/osu")
    if ((skip_spools)); then osu_args+=(--skip-spools); fi
    exec "$here/osu.sh" "${osu_args[@]}"
fi
if [[ $suite == rma ]]; then
    rma_args=(--runs "${runs_given:-3}" --out "${out:-$root/target/bench-peers}/rma")
    if ((skip_spools)); then rma_args+=(--skip-spools); fi
    exec "$here/rma.sh" "${rma_args[@]}"
fi
if [[ $suite == mpiio ]]; then
    mpiio_args=(--runs "${runs_given:-3}" --out "${out:-$root/target/bench-peers}/mpiio")
    if ((skip_spools)); then mpiio_args+=(--skip-spools); fi
    exec "$here/mpiio.sh" "${mpiio_args[@]}"
fi

# A relative --out is taken from the caller's directory; the default lives in the repository.
out=${out:-$root/target/bench-peers}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
cd "$root"

# Open MPI refuses to run as root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI by its explicit names when Debian's are there (MPICH may also be installed, for the
# osu suite; the generic mpicc/mpirun are whichever the alternatives point to).
mpicc_ompi=$(command -v mpicc.openmpi || echo mpicc)
mpirun_ompi=$(command -v mpirun.openmpi || echo mpirun)
mpirun_base=("$mpirun_ompi" --allow-run-as-root --oversubscribe)

# The spools command as built by cargo, and how its ping-pong is told to use TCP: the bench
# flag, and SPOOLS_TRANSPORT for the runtime configuration of every rank (the two agree).
spools="${CARGO_TARGET_DIR:-$root/target}/release/spools"
spools_tcp_args=(--transport tcp)

# How many 2-rank jobs each launcher starts and tears down in a row, per run.
launches=20

# Which suites run.
core=0 msg=0
if [[ $suite == core || $suite == all ]]; then core=1; fi
if [[ $suite == msg || $suite == all ]]; then msg=1; fi

# The msg suite: rank counts of the collectives, matrix sizes and rank counts of the matrix
# multiply, and the sizes of its ping-pongs (the same for all three).
coll_ranks=(2 4 8)
matmul_sizes=(1024 2048)
matmul_ranks=(1 2 4)
msg_pingpong_sizes=(8 64 512 4K 32K 256K 1M 4M 16M)

log() { printf '==> %s\n' "$*" >&2; }

as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    else
        sudo "$@"
    fi
}

# --- Tools -----------------------------------------------------------------------------------

packages=()
if ! command -v "$mpicc_ompi" >/dev/null || ! command -v "$mpirun_ompi" >/dev/null; then
    packages+=(openmpi-bin libopenmpi-dev)
fi
command -v python3 >/dev/null || packages+=(python3)
if ((${#packages[@]} > 0)); then
    log "installing ${packages[*]} with apt-get"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
fi

# --- Build -----------------------------------------------------------------------------------

programs=()
if ((core)); then programs+=(pingpong ring raw init); fi
if ((msg)); then programs+=(coll matmul); fi
if ((msg && !core)); then programs+=(pingpong); fi
log "building the MPI and raw programs into $out"
for prog in "${programs[@]}"; do
    "$mpicc_ompi" -O2 -Wall -Wextra -o "$out/$prog" "$here/$prog.c"
done

if ((skip_spools == 0)); then
    if ! command -v cargo >/dev/null; then
        echo "run.sh: cargo not found (install Rust, or pass --skip-spools)" >&2
        exit 1
    fi
    log "building spools (cargo build --release -p spools-cli)"
    cargo build --release -p spools-cli
    [[ -x $spools ]] || { echo "run.sh: $spools was not built" >&2; exit 1; }
fi

# The "tuned" run turns off the single-copy (CMA/XPMEM/KNEM) path of the shared-memory BTL.
# Open MPI up to 4.x calls that component vader, 5.x calls it sm (with vader as an alias):
# ask ompi_info which parameter names this installation knows.
# (Only the core suite has tuned runs.)
tuned_mca=()
if ((core)); then
    for btl in vader sm; do
        params=$(ompi_info --param btl "$btl" --level 9 2>/dev/null || true)
        if [[ $params == *"\"btl_${btl}_single_copy_mechanism\""* ]]; then
            tuned_mca+=(--mca "btl_${btl}_single_copy_mechanism" none)
        fi
    done
    if ((${#tuned_mca[@]} == 0)); then
        echo "run.sh: this Open MPI has no btl_vader/btl_sm_single_copy_mechanism parameter" >&2
        exit 1
    fi
    log "tuned Open MPI runs use: ${tuned_mca[*]}"
fi

# --- Record the host -------------------------------------------------------------------------

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit+=" (with local changes)"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $(nproc) cores, ${cpu:-unknown CPU}"
    echo "open mpi: $("$mpirun_ompi" --version 2>/dev/null | head -n1)"
    echo "compiler: $("$mpicc_ompi" --version | head -n1)"
    echo "spools: $commit"
    if ((core)); then echo "tuned: ${tuned_mca[*]}"; fi
    echo "suite: $suite"
    echo "runs: $runs"
} >"$out/host.txt"

# --- Run -------------------------------------------------------------------------------------

# Documents of an earlier invocation would otherwise be mixed into this one's medians.
if ((core)); then
    rm -f "$out"/{pingpong,ring,rate,logp,idle,launch}-*.run*.json "$out"/raw.run*.json
fi
if ((msg)); then
    rm -f "$out"/{coll,matmul,overlap,msg-pingpong}-*.run*.json
fi

# extract_json STDOUT JSON: keep the JSON document a program printed in file STDOUT as file
# JSON. The document is the whole output, or failing that the last line of it that parses as a
# JSON object with a "benchmark" field (launchers may add lines of their own).
extract_json() {
    python3 - "$1" "$2" <<'EOF'
import json, sys

text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
candidates = [text] + [line for line in reversed(text.splitlines()) if line.startswith("{")]
for candidate in candidates:
    try:
        doc = json.loads(candidate)
    except ValueError:
        continue
    if isinstance(doc, dict) and "benchmark" in doc:
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.write("\n")
        sys.exit(0)
sys.exit(1)
EOF
}

# fail_with WHY STDOUT ERRLOG CMD...: report a failed step with the tails of its output; exit.
fail_with() {
    local why=$1 stdout=$2 errlog=$3
    shift 3
    printf '%s\n' "$why" >&2
    echo "run.sh: $why: $*" >&2
    tail -n 20 "$errlog" "$stdout" >&2
    exit 1
}

# run_json NAME CMD...: run CMD and keep the JSON document it prints as $out/NAME.json (its
# stdout and stderr go to $out/logs/NAME.stdout and NAME.log).
run_json() {
    local name=$1
    shift
    local json="$out/$name.json" stdout="$out/logs/$name.stdout" errlog="$out/logs/$name.log"
    local start=$SECONDS
    printf '  %-34s' "$name" >&2
    "$@" >"$stdout" 2>"$errlog" || fail_with "FAILED" "$stdout" "$errlog" "$@"
    extract_json "$stdout" "$json" || fail_with "NO JSON" "$stdout" "$errlog" "$@"
    printf 'ok (%ds)\n' $((SECONDS - start)) >&2
}

# launch_json NAME LAUNCHER CMD...: run CMD, a whole trivial job (launch, init, teardown),
# $launches times in a row, each timed from outside with date +%s%N, and keep
#   {"benchmark":"launch","launcher":LAUNCHER,"launches":K,"wall_ms":[K walls],
#    "init_ms":[K lists: the per-rank init_ms of that job's document]}
# as $out/NAME.json. A wall time includes one `date` process (about a millisecond).
# The output of job K goes to $out/logs/NAME.K.{stdout,log,json}.
launch_json() {
    local name=$1 launcher=$2
    shift 2
    local json="$out/$name.json" start=$SECONDS k t0 t1 stdout errlog doc
    local walls=() docs=()
    printf '  %-34s' "$name" >&2
    for ((k = 1; k <= launches; k++)); do
        stdout="$out/logs/$name.$k.stdout" errlog="$out/logs/$name.$k.log"
        doc="$out/logs/$name.$k.json"
        t0=$(date +%s%N)
        "$@" >"$stdout" 2>"$errlog" || fail_with "FAILED (launch $k)" "$stdout" "$errlog" "$@"
        t1=$(date +%s%N)
        walls+=($((t1 - t0)))
        extract_json "$stdout" "$doc" || fail_with "NO JSON (launch $k)" "$stdout" "$errlog" "$@"
        docs+=("$doc")
    done
    python3 - "$json" "$launcher" "${walls[*]}" "${docs[@]}" <<'EOF'
import json, sys

json_path, launcher, walls, docs = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]
init_ms = []
for path in docs:
    with open(path, encoding="utf-8") as f:
        init_ms.append(json.load(f).get("init_ms"))
doc = {
    "benchmark": "launch",
    "launcher": launcher,
    "launches": len(walls),
    "wall_ms": [round(int(ns) / 1e6, 3) for ns in walls],
    "init_ms": init_ms,
}
with open(json_path, "w", encoding="utf-8") as f:
    json.dump(doc, f)
    f.write("\n")
EOF
    printf 'ok (%ds)\n' $((SECONDS - start)) >&2
}

# run_core I: the core suite's documents of run I.
run_core() {
    local i=$1 n
    if ((skip_spools == 0)); then
        run_json "pingpong-spools-shm.run$i" "$spools" run -n 2 -- "$spools" bench pingpong --json
        run_json "pingpong-spools-tcp.run$i" env SPOOLS_TRANSPORT=tcp \
            "$spools" run -n 2 -- "$spools" bench pingpong --json "${spools_tcp_args[@]}"
        run_json "rate-spools-shm.run$i" "$spools" run -n 2 -- "$spools" bench rate --json
        run_json "rate-spools-tcp.run$i" env SPOOLS_TRANSPORT=tcp \
            "$spools" run -n 2 -- "$spools" bench rate --json "${spools_tcp_args[@]}"
        run_json "logp-spools-shm.run$i" "$spools" run -n 2 -- "$spools" bench logp --json
        run_json "idle-spools-shm.run$i" "$spools" run -n 2 -- "$spools" bench idle --json
    fi
    run_json "pingpong-mpi-default.run$i" "${mpirun_base[@]}" -n 2 "$out/pingpong"
    run_json "pingpong-mpi-tuned.run$i" "${mpirun_base[@]}" "${tuned_mca[@]}" -n 2 "$out/pingpong"
    run_json "pingpong-mpi-tcp.run$i" "${mpirun_base[@]}" --mca btl tcp,self -n 2 "$out/pingpong"
    run_json "raw.run$i" "$out/raw"
    for n in 2 8; do
        if ((skip_spools == 0)); then
            run_json "ring-spools-n$n.run$i" "$spools" run -n "$n" -- "$spools" bench ring --json
        fi
        run_json "ring-mpi-n$n.run$i" "${mpirun_base[@]}" -n "$n" "$out/ring"
    done
    if ((skip_spools == 0)); then
        launch_json "launch-spools.run$i" spools "$spools" run -n 2 -- "$spools" bench init --json
    fi
    launch_json "launch-mpi.run$i" mpi "${mpirun_base[@]}" -n 2 "$out/init"
}

# run_msg I: the msg suite's documents of run I.
run_msg() {
    local i=$1 n p sizes_csv
    sizes_csv=$(IFS=,; echo "${msg_pingpong_sizes[*]}")
    for p in "${coll_ranks[@]}"; do
        if ((skip_spools == 0)); then
            run_json "coll-spools-P$p.run$i" "$spools" run -n "$p" -- "$spools" bench coll --json
        fi
        run_json "coll-mpi-P$p.run$i" "${mpirun_base[@]}" -n "$p" "$out/coll"
    done
    for n in "${matmul_sizes[@]}"; do
        for p in "${matmul_ranks[@]}"; do
            if ((skip_spools == 0)); then
                run_json "matmul-spools-n$n-P$p.run$i" \
                    "$spools" run -n "$p" -- "$spools" bench matmul --n "$n" --json
            fi
            run_json "matmul-mpi-n$n-P$p.run$i" "${mpirun_base[@]}" -n "$p" "$out/matmul" --n "$n"
        done
    done
    if ((skip_spools == 0)); then
        run_json "msg-pingpong-spools-tagged.run$i" "$spools" run -n 2 -- \
            "$spools" bench pingpong --api tagged --json --sizes "$sizes_csv"
        run_json "msg-pingpong-spools-am.run$i" "$spools" run -n 2 -- \
            "$spools" bench pingpong --json --sizes "$sizes_csv"
    fi
    run_json "msg-pingpong-mpi.run$i" "${mpirun_base[@]}" -n 2 "$out/pingpong" \
        "${msg_pingpong_sizes[@]}"
    if ((skip_spools == 0)); then
        run_json "overlap-spools.run$i" "$spools" run -n 2 -- "$spools" bench overlap --json
        run_json "overlap-spools-thread.run$i" env SPOOLS_PROGRESS_THREAD=1 \
            "$spools" run -n 2 -- "$spools" bench overlap --json
    fi
}

for ((i = 1; i <= runs; i++)); do
    log "run $i of $runs"
    if ((core)); then run_core "$i"; fi
    if ((msg)); then run_msg "$i"; fi
done

# --- Summarize -------------------------------------------------------------------------------

log "summary (also in $out/summary.md)"
python3 "$here/summarize.py" "$out" | tee "$out/summary.md"
