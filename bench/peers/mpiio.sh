#!/usr/bin/env bash
# The MPI-IO peer benchmark (issue 38): the repository's coll_perf-style program
# (bench/peers/io.c: an i32 n^3 array, each element its index, written with
# MPI_File_write_all and read with MPI_File_read_all through a file view, every element
# and the whole file verified) compiled once by mpicc_abi and run on Spools'
# libmpi_abi.so.1 and on MPICH 5.0.2's (ROMIO), and rebuilt for Open MPI and run with
# OMPIO and with its ROMIO component.
#
# Usage: bench/peers/mpiio.sh [--runs N] [--out DIR] [--sizes LIST] [--ranks LIST]
#                             [--skip-big] [--big-runs N] [--reps R] [--views LIST]
#                             [--cyclic-max-n N] [--job-timeout S] [--skip-spools]
#   (also reached as bench/peers/run.sh --suite mpiio, with --runs, --out and --skip-spools)
#
#   --runs N          rounds of every point, interleaved across the implementations
#                     (default 3); the summary takes the median over them
#   --out DIR         where the programs, the JSON documents, the logs, the files and the
#                     summary go (default target/bench-peers/mpiio under the repository root)
#   --sizes LIST      n of the n^3 int arrays, comma-separated (default 128,512: 8 MiB and
#                     512 MiB)
#   --ranks LIST      rank counts, comma-separated (default 2,4; 4 ranks oversubscribe 2 cores)
#   --skip-big        drop the sizes above 256 (a quick check)
#   --big-runs N      sizes above 256 in the first N rounds only (default: every round)
#   --reps R          write+read repetitions in one job (default 3); a job's figure is the
#                     median of its R, the first of which writes a fresh file
#   --views LIST      darray,cyclic (the default) or one of them: darray is the 3-D BLOCK
#                     view (long runs: rows of each rank's block), cyclic the cyclic(1) view
#                     (every run a single 4-byte element)
#   --cyclic-max-n N  the cyclic view only for n up to N (default 128: see "What fits")
#   --job-timeout S   a job (one launch) that runs longer is killed and counted as failed
#                     (default 900)
#   --skip-spools     no Spools column (no cargo build)
#
# Steps: source scripts/mpi-abi-env.sh (target/mpi-venv: the mpich wheel's mpicc_abi,
# mpiexec and MPICH's own libmpi_abi.so.1); install Open MPI through scripts/install-mpi.sh
# if mpicc.openmpi / mpirun.openmpi are missing; build the spools command (cargo build
# --release --locked -p spools-cli) and Spools' libmpi_abi.so.1 (make -C crates/spools-mpi),
# both then copied to DIR/bin (a later build cannot change them during the run);
# build io.c once with mpicc_abi -O2 into DIR/io-abi, with a constructor
# (bench/peers/abi_which.c) by which every rank reports on stderr the libmpi_abi it loaded and
# its MPI_Get_library_version, and once with mpicc.openmpi -O2 into DIR/io-openmpi; find
# Open MPI's ROMIO component (ompi_info: romio321, romio341, ...); check the memory
# (MemAvailable) and the disk (df) every job needs, skipping with a note what does not fit
# (an implementation at one point; the cyclic view above --cyclic-max-n).
# Then per run, size, rank count P, mode (buffered; durable: io.c --sync, MPI_File_sync
# inside the timed write) and view, each of (in an order rotated every run):
#   Spools         spools run -n P -- io-abi ...     (Spools puts its library first on
#                                                     LD_LIBRARY_PATH)
#   MPICH ROMIO    the wheel's mpiexec -n P io-abi ...
#   OMPIO          mpirun.openmpi --oversubscribe -n P --mca io ompio io-openmpi ...
#   OMPI ROMIO     mpirun.openmpi --oversubscribe -n P --mca io romioNNN io-openmpi ...
# each after a `sync` (untimed: no job starts with another's dirty pages; the page cache is
# never dropped). Every file is DIR/files/io-IMPL.dat, on the same file system for all,
# deleted at the end of each job. Each job's JSON is kept as
# DIR/nN-PP-MODE-VIEW-IMPL.runI.json (stderr in DIR/logs/); a job that fails, times out or
# reads wrong data leaves DIR/...runI.failed with its error and the run goes on (the exit
# status is then 1); a job of the ABI binary that did not load the library it should stops
# everything. The summary (DIR/summary.md, printed): per point the median write and read
# bandwidth (MB/s, 10^6 bytes/s; the bytes of the array over the timed region) of each
# implementation and Spools' ratio to the best other MPI-IO, the same for the first
# (fresh-file) write of each job, for the cyclic view its ratio to the darray view of the
# same implementation, the peak resident set summed over the ranks (io.c's VmHWM), and
# every failure and skip. DIR/results.json has every sample.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

runs=3
out=""
sizes="128,512"
ranks="2,4"
skip_big=0
big_runs=""
reps=3
views="darray,cyclic"
cyclic_max=128
job_timeout=900
skip_spools=0

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; }

while (($# > 0)); do
    case $1 in
    --runs)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "mpiio.sh: --runs needs a positive integer" >&2; exit 2; }
        runs=$2; shift 2 ;;
    --out)
        [[ $# -ge 2 && -n $2 ]] || { echo "mpiio.sh: --out needs a directory" >&2; exit 2; }
        out=$2; shift 2 ;;
    --sizes)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "mpiio.sh: --sizes needs n values, e.g. 128,512" >&2; exit 2; }
        sizes=$2; shift 2 ;;
    --ranks)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "mpiio.sh: --ranks needs rank counts, e.g. 2,4" >&2; exit 2; }
        ranks=$2; shift 2 ;;
    --skip-big) skip_big=1; shift ;;
    --big-runs)
        [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "mpiio.sh: --big-runs needs a number of rounds" >&2; exit 2; }
        big_runs=$2; shift 2 ;;
    --reps)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "mpiio.sh: --reps needs a positive integer" >&2; exit 2; }
        reps=$2; shift 2 ;;
    --views)
        [[ $# -ge 2 && $2 =~ ^(darray|cyclic)(,(darray|cyclic))?$ ]] || { echo "mpiio.sh: --views needs darray, cyclic or both" >&2; exit 2; }
        views=$2; shift 2 ;;
    --cyclic-max-n)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "mpiio.sh: --cyclic-max-n needs an n" >&2; exit 2; }
        cyclic_max=$2; shift 2 ;;
    --job-timeout)
        [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "mpiio.sh: --job-timeout needs seconds" >&2; exit 2; }
        job_timeout=$2; shift 2 ;;
    --skip-spools) skip_spools=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "mpiio.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

out=${out:-$root/target/bench-peers/mpiio}
mkdir -p "$out/logs" "$out/files"
out=$(cd "$out" && pwd)
files="$out/files"
cd "$root"
log() { printf '==> %s\n' "$*" >&2; }

command -v python3 >/dev/null || { echo "mpiio.sh: python3 is needed" >&2; exit 1; }

IFS=, read -r -a size_list <<<"$sizes"
IFS=, read -r -a rank_list <<<"$ranks"
IFS=, read -r -a view_list <<<"$views"
if ((skip_big)); then
    kept=()
    for n in "${size_list[@]}"; do
        if ((n <= 256)); then kept+=("$n"); fi
    done
    size_list=("${kept[@]}")
fi
((${#size_list[@]} > 0)) || { echo "mpiio.sh: no sizes left (--skip-big drops those above 256)" >&2; exit 2; }

log "the MPI standard ABI: target/mpi-venv (scripts/mpi-abi-env.sh: PyPI's mpich==5.0.2)"
# Sets mpi_venv, mpicc_abi and mpich_lib (installs the wheel the first time only).
source "$root/scripts/mpi-abi-env.sh"
mpiexec_abi="$mpi_venv/bin/mpiexec"
[[ -x $mpicc_abi && -x $mpiexec_abi && -e $mpich_lib/libmpi_abi.so.1 ]] \
    || { echo "mpiio.sh: target/mpi-venv lacks mpicc_abi, mpiexec or lib/libmpi_abi.so.1" >&2; exit 1; }
mpich_abi_lib=$(readlink -f "$mpich_lib/libmpi_abi.so.1")

if ! command -v mpicc.openmpi >/dev/null || ! command -v mpirun.openmpi >/dev/null; then
    log "installing Open MPI (scripts/install-mpi.sh)"
    "$root/scripts/install-mpi.sh"
fi
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null \
    || { echo "mpiio.sh: no mpicc.openmpi / mpirun.openmpi after scripts/install-mpi.sh" >&2; exit 1; }

spools="${CARGO_TARGET_DIR:-$root/target}/release/spools"
spools_abi_lib=""
if ((skip_spools == 0)); then
    log "building spools (cargo build --release --locked -p spools-cli)"
    cargo build --release --locked -p spools-cli
    [[ -x $spools ]] || { echo "mpiio.sh: $spools was not built" >&2; exit 1; }
    log "building Spools' libmpi_abi.so.1 (make -C crates/spools-mpi)"
    make --no-print-directory -C "$root/crates/spools-mpi" >&2
    # spools run takes the library beside its executable (SPOOLS_MPI_LIB would override).
    unset SPOOLS_MPI_LIB
    built_lib=$(readlink -f "$(dirname "$spools")/libmpi_abi.so.1" || true)
    [[ -n $built_lib && -f $built_lib ]] \
        || { echo "mpiio.sh: no libmpi_abi.so.1 beside $spools" >&2; exit 1; }
    # The run uses copies of both in DIR/bin, so that a build during it (another cargo
    # in the same target directory) cannot change the library under it.
    mkdir -p "$out/bin"
    cp -f "$spools" "$out/bin/spools"
    cp -f "$built_lib" "$out/bin/libmpi_abi.so.1"
    spools="$out/bin/spools"
    spools_abi_lib=$(readlink -f "$out/bin/libmpi_abi.so.1")
fi

# Every rank of an ABI run says which libmpi_abi it loaded and what that library calls
# itself (MPI_Get_library_version may be called before MPI_Init): bench/peers/abi_which.c.
log "building io.c once with $mpicc_abi into $out/io-abi, and with mpicc.openmpi"
"$mpicc_abi" -O2 -Wall -Wextra -o "$out/io-abi" "$here/io.c" -DWHICH_PREFIX='"io-abi"' "$here/abi_which.c"
mpicc.openmpi -O2 -Wall -Wextra -o "$out/io-openmpi" "$here/io.c"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_run=(mpirun.openmpi --oversubscribe)
# Open MPI's ROMIO component, by the name this build gives it (romio321 in 4.1, romio341 in
# 5.0); none means no "OMPI ROMIO" column.
romio=$(ompi_info 2>/dev/null | sed -n 's/.*MCA io: \(romio[0-9]*\).*/\1/p' | head -n1 || true)

impls=()
if ((skip_spools == 0)); then impls+=(spools); fi
impls+=(mpich ompio)
if [[ -n $romio ]]; then impls+=(romio); fi

# cmd_of IMPL P: the launch of IMPL on P ranks, in the array cmd (io.c's options follow).
cmd_of() {
    local impl=$1 p=$2
    case $impl in
    spools) cmd=("$spools" run -n "$p" -- "$out/io-abi") ;;
    # The binary's RUNPATH already names the wheel's lib; LD_LIBRARY_PATH makes sure nothing
    # from the caller's environment comes first.
    mpich) cmd=("$mpiexec_abi" -n "$p" env LD_LIBRARY_PATH="$mpich_lib" "$out/io-abi") ;;
    ompio) cmd=("${ompi_run[@]}" -n "$p" --mca io ompio "$out/io-openmpi") ;;
    romio) cmd=("${ompi_run[@]}" -n "$p" --mca io "$romio" "$out/io-openmpi") ;;
    esac
}

# --- What fits -------------------------------------------------------------------------------
# Memory a job needs at most, summed over its ranks: 1 GiB for the libraries and the
# launchers, and for the darray view the array twice (io.c's write and read buffers). A
# cyclic(1) view makes every 4-byte element a run of its own, and the MPI-IOs keep per-run
# lists (offsets and lengths; ROMIO's and OMPIO's at the aggregators too): its need is per
# element, from the peak resident sets summed over the ranks at 256^3 (2 and 4 ranks, this
# machine, while this script was written): Spools 92 and 107, MPICH ROMIO 76 and 81, OMPIO
# 40 and 180, Open MPI's ROMIO 144 and 124 bytes per element, taken here as 120, 90, 200
# and 160. A job must fit in 80 % of MemAvailable (there is no swap); an implementation
# that would not is skipped at that point, with a note. Disk: the file and 1 GiB. The
# cyclic view also stops at n = --cyclic-max-n (default 128): its times grow with the
# number of elements (at 256^3, one write and one read, 2 ranks: Spools 1.7 and 1.1 s,
# MPICH ROMIO 3.4 and 2.5 s, OMPIO 34 and 0.6 s, Open MPI's ROMIO 18 and 16 s; 4 ranks:
# OMPIO 63 and 59 s), and at 512^3, 8 times the elements, OMPIO and Open MPI's ROMIO
# would not fit here anyway.
mem_avail=$(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024))
disk_avail=$(df -B1 --output=avail "$files" | tail -n1 | tr -d ' ')
declare -A per_element=([spools]=120 [mpich]=90 [ompio]=200 [romio]=160)
: >"$out/skipped.txt"
# fits N P VIEW IMPL: 0 if the job fits, else 1 and a note in skipped.txt.
fits() {
    local n=$1 p=$2 view=$3 impl=$4 bytes need
    bytes=$((n * n * n * 4))
    if [[ $view == cyclic ]]; then
        need=$(((1 << 30) + per_element[$impl] * bytes / 4))
    else
        need=$(((1 << 30) + 2 * bytes))
    fi
    if ((need > mem_avail / 5 * 4)); then
        echo "n=$n P=$p $view $impl: needs about $((need >> 20)) MiB of memory, more than 80 % of the $((mem_avail >> 20)) MiB available" >>"$out/skipped.txt"
        return 1
    fi
    if ((bytes + (1 << 30) > disk_avail)); then
        echo "n=$n P=$p $view $impl: needs $(((bytes + (1 << 30)) >> 20)) MiB of disk in $files, $((disk_avail >> 20)) MiB free" >>"$out/skipped.txt"
        return 1
    fi
    return 0
}
points=() # "n p view impl,impl,..."
for n in "${size_list[@]}"; do
    for p in "${rank_list[@]}"; do
        for view in "${view_list[@]}"; do
            if [[ $view == cyclic ]] && ((n > cyclic_max)); then
                echo "n=$n P=$p cyclic: above --cyclic-max-n $cyclic_max (time and memory: see \"What fits\" in bench/peers/mpiio.sh)" >>"$out/skipped.txt"
                continue
            fi
            ok=()
            for impl in "${impls[@]}"; do
                if fits "$n" "$p" "$view" "$impl"; then ok+=("$impl"); fi
            done
            if ((${#ok[@]} > 0)); then points+=("$n $p $view $(IFS=,; echo "${ok[*]}")"); fi
        done
    done
done
if [[ -s $out/skipped.txt ]]; then log "skipped: $(tr '\n' ';' <"$out/skipped.txt")"; fi
((${#points[@]} > 0)) || { echo "mpiio.sh: no point fits this machine" >&2; exit 1; }

# --- Record the host and the components ------------------------------------------------------
# Which fcoll component OMPIO takes for each view and rank count (selected at every open
# and set_view; the write and read ones are the same here), and the hints each
# implementation reports for the file (MPI_File_get_info; Open MPI 4.1 returns only the
# info passed in, here none).
probe="$files/probe.dat"
components=()
for p in "${rank_list[@]}"; do
    for view in "${view_list[@]}"; do
        fcoll=$("${ompi_run[@]}" -n "$p" --mca io ompio --mca fcoll_base_verbose 10 "$out/io-openmpi" \
            --n 16 --view "$view" --file "$probe" --reps 1 2>&1 \
            | sed -n 's/.*select: component \([a-z_0-9]*\) selected.*/\1/p' | sort | uniq -c \
            | awk '{printf "%s%s", (NR > 1 ? "+" : ""), $2}' || true)
        components+=("OMPIO P=$p $view: fs ufs, fbtl posix, fcoll ${fcoll:-unknown}")
    done
done
hints=()
for impl in "${impls[@]}"; do
    cmd_of "$impl" 2
    h=$("${cmd[@]}" --n 16 --view darray --file "$probe" --reps 1 --hints 2>&1 >/dev/null \
        | sed -n 's/^io-hints: *//p' | head -n1 || true)
    hints+=("$impl: ${h:-(none)}")
done
rm -f "$probe"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit+=" (with local changes)"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $(nproc) cores, ${cpu:-unknown CPU}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "memory: $((mem_avail >> 20)) MiB available of $(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo) MiB"
    echo "files: $files on $(df --output=source,fstype "$files" | tail -n1 | tr -s ' '), $((disk_avail >> 30)) GiB free"
    echo "io-abi: bench/peers/io.c by the mpich wheel's mpicc_abi -O2, one binary for Spools and MPICH"
    if ((skip_spools == 0)); then
        echo "Spools: $spools_abi_lib (spools run -n P; sha256 $(sha256sum "$spools_abi_lib" | cut -c1-16), built $(date -u -r "$spools_abi_lib" +%Y-%m-%dT%H:%M:%SZ)), commit $commit"
    fi
    echo "MPICH ROMIO: $("$mpi_venv/bin/mpichversion" 2>/dev/null | head -n1 | tr -s ' \t' ' ') ($mpich_abi_lib, the wheel's mpiexec -n P)"
    echo "Open MPI: $(mpirun.openmpi --version 2>/dev/null | head -n1), io.c by mpicc.openmpi -O2, ${ompi_run[*]} -n P --mca io ompio|${romio:-(no ROMIO component)}"
    for c in "${components[@]}"; do echo "  $c"; done
    echo "hints (MPI_File_get_info, 2 ranks):"
    for h in "${hints[@]}"; do echo "  $h"; done
    echo "runs: $runs${big_runs:+ (sizes above 256: the first $big_runs)}; $reps write+read repetitions per job (median), the first into a fresh file"
} >"$out/host.txt"
rm -f "$out"/*.run*.json "$out"/*.run*.failed

# --- Run -------------------------------------------------------------------------------------

failures=0

# abi_check NAME P LIB WORD: each of the P ranks of the ABI run NAME loaded LIB (a real
# path) and its MPI_Get_library_version names WORD; else stop, with what they loaded.
abi_check() {
    local name=$1 p=$2 want=$3 word=$4 log="$out/logs/$1.log" libs versions bad=0 l
    mapfile -t libs < <(sed -n 's/.*io-abi-library: pid [0-9]* loaded //p' "$log")
    mapfile -t versions < <(sed -n 's/.*io-abi-version: pid [0-9]* //p' "$log")
    ((${#libs[@]} == p && ${#versions[@]} == p)) || bad=1
    for l in "${libs[@]}"; do [[ $l == "$want" ]] || bad=1; done
    for l in "${versions[@]}"; do [[ $l == *"$word"* ]] || bad=1; done
    if ((bad)); then
        {
            echo "mpiio.sh: WRONG MPI LIBRARY in $name: its $p ranks had to load $want ($word)"
            echo "  they loaded: ${libs[*]:-nothing reported}"
            echo "  they are: ${versions[*]:-nothing reported}"
        } >&2
        exit 1
    fi
}

# job NAME P IMPL ARGS...: run io.c ARGS on P ranks of IMPL; keep its JSON document as
# $out/NAME.json, or its error as $out/NAME.failed.
job() {
    local name=$1 p=$2 impl=$3 start=$SECONDS rc=0
    shift 3
    cmd_of "$impl" "$p"
    local stdout="$out/logs/$name.stdout" errlog="$out/logs/$name.log"
    printf '  %-44s' "$name" >&2
    sync
    timeout -k 20 "$job_timeout" "${cmd[@]}" "$@" >"$stdout" 2>"$errlog" || rc=$?
    rm -f "$files/io-$impl.dat"
    if ((rc == 0)); then
        case $impl in
        spools) abi_check "$name" "$p" "$spools_abi_lib" Spools ;;
        mpich) abi_check "$name" "$p" "$mpich_abi_lib" MPICH ;;
        esac
    fi
    if ((rc == 0)) && python3 - "$stdout" "$out/$name.json" <<'EOF'; then
import json, sys

stdout, dest = sys.argv[1:3]
doc = None
for line in reversed(open(stdout, encoding="utf-8", errors="replace").read().splitlines()):
    if line.startswith("{"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("benchmark") == "io-mpi":
            doc = d
            break
if doc is None:
    sys.exit(1)
with open(dest, "w", encoding="utf-8") as f:
    json.dump(doc, f)
    f.write("\n")
EOF
        printf 'ok (%ds)\n' $((SECONDS - start)) >&2
        return 0
    fi
    local why="exit status $rc"
    if ((rc == 124 || rc == 137)); then why="killed after the job timeout of ${job_timeout} s"; fi
    if ((rc == 0)); then why="no JSON document"; fi
    {
        echo "$why: ${cmd[*]} $*"
        { grep -v -e '^io-abi-' "$errlog" || true; } | tail -n 20
    } >"$out/$name.failed"
    echo "FAILED ($why)" >&2
    sed 's/^/      /' "$out/$name.failed" >&2
    failures=$((failures + 1))
}

for ((i = 1; i <= runs; i++)); do
    log "run $i of $runs"
    # The implementations in an order rotated every run.
    order=()
    for ((k = 0; k < ${#impls[@]}; k++)); do
        order+=("${impls[$(((k + i - 1) % ${#impls[@]}))]}")
    done
    for pt in "${points[@]}"; do
        read -r n p view here_impls <<<"$pt"
        if [[ -n $big_runs ]] && ((n > 256 && i > big_runs)); then continue; fi
        for mode in buffered durable; do
            sync_arg=()
            if [[ $mode == durable ]]; then sync_arg=(--sync); fi
            for impl in "${order[@]}"; do
                if [[ ,$here_impls, != *,$impl,* ]]; then continue; fi
                job "n$n-P$p-$mode-$view-$impl.run$i" "$p" "$impl" --n "$n" --view "$view" \
                    --reps "$reps" --file "$files/io-$impl.dat" "${sync_arg[@]}"
            done
        done
    done
done

# --- Summarize -------------------------------------------------------------------------------

log "summary (also in $out/summary.md)"
python3 - "$out" "$romio" <<'EOF' | tee "$out/summary.md"
import json, re, statistics, sys
from collections import defaultdict
from pathlib import Path

out, romio = Path(sys.argv[1]), sys.argv[2]
NAME = re.compile(r"^n(\d+)-P(\d+)-(buffered|durable)-(darray|cyclic)-(spools|mpich|ompio|romio)\.run(\d+)\.(json|failed)$")
IMPLS = [("spools", "Spools"), ("mpich", "MPICH ROMIO"), ("ompio", "OMPI OMPIO"),
         ("romio", f"OMPI ROMIO ({romio})" if romio else "OMPI ROMIO")]
LABEL = dict(IMPLS)

job = defaultdict(dict)     # (n, p, mode, view, impl) -> run -> (write_s, read_s, rss_sum_kb, fresh_write_s)
failed = []
samples = []
for f in sorted(out.iterdir()):
    m = NAME.match(f.name)
    if not m:
        continue
    n, p, mode, view, impl, run, kind = m.groups()
    key = (int(n), int(p), mode, view, impl)
    if kind == "failed":
        failed.append((key, int(run), f.read_text(encoding="utf-8", errors="replace").strip()))
        continue
    d = json.loads(f.read_text(encoding="utf-8"))
    w, r = statistics.median(d["write_s"]), statistics.median(d["read_s"])
    rss = d.get("peak_rss_kb") or []
    ok = len(rss) == int(p) and min(rss) >= 0
    job[key][int(run)] = (w, r, sum(rss) if ok else None, d["write_s"][0])
    samples.append({"n": int(n), "ranks": int(p), "mode": mode, "view": view, "impl": impl,
                    "run": int(run), "bytes": d["bytes"], "write_s": d["write_s"],
                    "read_s": d["read_s"], "peak_rss_kb": rss})
(out / "results.json").write_text(json.dumps(samples, indent=1) + "\n", encoding="utf-8")

host = out / "host.txt"
if host.exists():
    print("```")
    print(host.read_text(encoding="utf-8").rstrip())
    print("```")
    print()
if not job and not failed:
    print(f"no results in {out}")
    sys.exit(1)

def bw(key, which):
    """Median over the runs of the job medians, as MB/s; None if none."""
    runs = job.get(key)
    if not runs:
        return None
    n = key[0]
    t = statistics.median(v[which] for v in runs.values())
    return n ** 3 * 4 / t / 1e6

def nruns(key):
    return len(job.get(key, {}))

def fmt(v):
    return "n/a" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}")

points = sorted({k[:4] for k in job} | {k[:4] for k, _, _ in failed},
                key=lambda k: (k[0], k[1], k[2] == "durable", k[3] == "cyclic"))
impls = [i for i, _ in IMPLS if any(k[4] == i for k in job) or any(k[4] == i for k, _, _ in failed)]
others = [i for i in impls if i != "spools"]

def value(key, which):
    v = bw(key, which)
    if v is None:
        return "FAIL" if any(k == key for k, _, _ in failed) else "n/a"
    s = fmt(v)
    if 0 < nruns(key) and any(k == key for k, _, _ in failed):
        s += "*"
    return s

TITLES = {
    0: "Write: MB/s (the n^3 int array over the timed region: open, set_view, write_all, "
       "sync if durable, close), median over the runs of each job's median of its "
       "repetitions (the first into a fresh file, the others overwriting it); higher is better",
    1: "Read: MB/s (open, set_view, read_all, close), median over the runs of each job's "
       "median; higher is better",
    3: "Fresh-file write: MB/s of each job's first write (the file did not exist), median "
       "over the runs; higher is better",
}
for which in (0, 1, 3):
    print(f"### {TITLES[which]}")
    print()
    head = ["n^3", "ranks", "mode", "view"] + [LABEL[i] for i in impls]
    if "spools" in impls and others:
        head.append("Spools / best other")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * 4 + "---:|" * (len(head) - 4))
    for pt in points:
        n, p, mode, view = pt
        row = [f"{n}^3 ({n ** 3 * 4 >> 20} MiB)", str(p), mode, view]
        row += [value(pt + (i,), which) for i in impls]
        if "spools" in impls and others:
            sp = bw(pt + ("spools",), which)
            best = max(((bw(pt + (o,), which), o) for o in others if bw(pt + (o,), which) is not None),
                       default=(None, None))
            row.append(f"{sp / best[0]:.2f} ({LABEL[best[1]]})" if sp and best[0] else "n/a")
        print("| " + " | ".join(row) + " |")
    print()

pairs = sorted({pt[:3] for pt in points if pt[3] == "cyclic"} & {pt[:3] for pt in points if pt[3] == "darray"},
               key=lambda k: (k[0], k[1], k[2] == "durable"))
if pairs:
    print("### Single-element runs against long runs: cyclic(1) bandwidth / darray bandwidth, "
          "same implementation (1.00: no cost for the 4-byte runs)")
    print()
    head = ["n^3", "ranks", "mode"] + [f"{LABEL[i]} write" for i in impls] + [f"{LABEL[i]} read" for i in impls]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * 3 + "---:|" * (len(head) - 3))
    for n, p, mode in pairs:
        row = [f"{n}^3", str(p), mode]
        for which in (0, 1):
            for i in impls:
                c, d = bw((n, p, mode, "cyclic", i), which), bw((n, p, mode, "darray", i), which)
                row.append(f"{c / d:.3f}" if c and d else "n/a")
        print("| " + " | ".join(row) + " |")
    print()

print("### Peak resident set, summed over the ranks (MiB; each rank's VmHWM at the end of "
      "the job, as io.c reports it; median over the runs, the larger of buffered and durable)")
print()
head = ["n^3", "ranks", "view"] + [LABEL[i] for i in impls]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * 3 + "---:|" * (len(head) - 3))
for n, p, view in sorted({pt[:2] + (pt[3],) for pt in points}, key=lambda k: (k[0], k[1], k[2] == "cyclic")):
    row = [f"{n}^3", str(p), view]
    for i in impls:
        vals = []
        for mode in ("buffered", "durable"):
            rs = [v[2] for v in job.get((n, p, mode, view, i), {}).values() if v[2] is not None]
            if rs:
                vals.append(statistics.median(rs))
        row.append(f"{max(vals) / 1024:.0f}" if vals else "n/a")
    print("| " + " | ".join(row) + " |")
print()

runs_seen = sorted({r for v in job.values() for r in v})
print(f"Runs: {len(runs_seen)} ({', '.join(map(str, runs_seen))}), alternating the implementations "
      "(order rotated every run). Buffered: the write returns once the data are in the page cache "
      "(no sync; nothing is dropped from the page cache, so every read, buffered or durable, is "
      "served from it); durable: MPI_File_sync inside the timed write. Every element read back and "
      "the whole file were verified in every job. Bandwidth: n^3 * 4 bytes / seconds / 10^6. "
      "Ratios are of the medians. A * marks a point where some run failed (the median is of the others).")
print()
skipped = (out / "skipped.txt").read_text(encoding="utf-8").strip() if (out / "skipped.txt").exists() else ""
if not romio:
    print("Open MPI has no ROMIO component here (ompi_info lists no `MCA io: romio*`): no OMPI ROMIO column.")
    print()
if skipped:
    print("Skipped:")
    print()
    for line in skipped.splitlines():
        print(f"- {line}")
    print()
if failed:
    print(f"Failures ({len(failed)}):")
    print()
    for (n, p, mode, view, impl), run, text in failed:
        first = text.splitlines()
        print(f"- n={n} P={p} {mode} {view} {LABEL[impl]}, run {run}:")
        print("  ```")
        for line in first:
            print(f"  {line}")
        print("  ```")
    print()
EOF

if ((failures > 0)); then
    echo "mpiio.sh: $failures job(s) failed (see the summary and $out/*.failed)" >&2
    exit 1
fi
