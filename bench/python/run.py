#!/usr/bin/env python3
"""Runs the Python benchmarks of spools and mpi4py side by side, alternating.

usage: bench/python/run.py [--runs N] [--out DIR] [--only pingpong,coll,redist]
                           [--spools BIN] [--mpirun BIN] [--python BIN]
                           [--sides spools,mpi4py,mpi4py-spools] [--abi-python BIN]
                           [--spools-env VAR=VALUE] [--native]
                           [--mpicc BIN] [--timeout SECONDS]

scripts/bench-python.sh builds and installs everything, then calls this. Per run and per
benchmark, the spools program runs first (`spools run -n N -- python bench_spools.py
TEST`), then the mpi4py program on Open MPI (`mpirun --oversubscribe -n N python
bench_mpi4py.py TEST`), then the same mpi4py program on Spools (side mpi4py-spools:
`spools run -n N -- env ABI_PYTHON bench_mpi4py.py TEST`, where ABI_PYTHON, by default
target/mpi-venv/bin/python, has mpi4py 4.1.2 built against the MPI 5.0 standard ABI, and
spools run makes it load Spools' libmpi_abi.so.1), so the sides alternate: spools, mpi4py,
mpi4py-spools, spools, ... Every sample goes to DIR/runs.jsonl, every job's output to
DIR/logs/, and summarize.py writes DIR/summary.md (medians over the runs, ratios, goals).

Why `env`: for a rank program named python* whose interpreter finds the `spools` package
(target/mpi-venv has it once scripts/test-mpi4py.sh ran), spools run puts the package's
extension first instead of libmpi_abi.so.1, and that extension is whatever build the
last `maturin develop` left in crates/spools-py/python/spools/ (test-mpi4py.sh's is a
debug build). Started through `env`, the ranks get the release libmpi_abi.so.1 beside
--spools that `make -C crates/spools-mpi` just built, and the check below insists on it.

For mpi4py-spools this script first makes sure of what it needs: target/mpi-venv with the
ABI-built mpi4py (`MPI4PY=1 source scripts/mpi-abi-env.sh`, cached; only for the default
--abi-python) and Spools' library beside --spools (`make -C crates/spools-mpi`). Every
mpi4py job reports MPI.Get_library_version() (the same on every rank, checked by
bench_mpi4py.py): the run stops if mpi4py-spools did not load Spools' libmpi_abi.so.1 beside
--spools (the string names Spools and the file), or if the Open MPI side loaded Spools.

Benchmarks (names for --only): pingpong (2 ranks: 8 B and 1 MiB), coll (4 ranks:
allreduce 8 B and 1 MiB, bcast 1 MiB), redist (4 ranks: 2048x2048 float64 block -> cyclic).
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RANKS = {"pingpong": 2, "coll": 4, "redist": 4}
SIDES = ("spools", "mpi4py", "mpi4py-spools")
ABI_PYTHON = os.path.join(ROOT, "target", "mpi-venv", "bin", "python")
LIBRARY_LINE = "from mpi4py import MPI; print(MPI.Get_library_version().replace(chr(0), '').splitlines()[0])"


def parse_bench(text):
    for line in text.splitlines():
        # spools run may prefix lines with the rank; the document follows "BENCH ".
        at = line.find("BENCH {")
        if at >= 0:
            return json.loads(line[at + len("BENCH ") :])
    raise RuntimeError("no BENCH line in the output")


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def parse_osu_8b(impl):
    """A parser of an OSU latency table (`# Size` then `size value` rows): its 8-byte row."""

    def parse(text):
        for line in text.splitlines():
            f = line.split()
            if len(f) == 2 and f[0] == "8":
                return {"impl": impl, "test": "pingpong", "ranks": 2, "results": {"8B": {"one_way_us": float(f[1])}}}
        raise RuntimeError("no 8-byte row in the OSU table")

    return parse


def run_job(cmd, log_base, env, timeout, parse=parse_bench):
    load = loadavg()
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.monotonic() - t0
    with open(log_base + ".out", "w") as f:
        f.write(p.stdout)
    with open(log_base + ".err", "w") as f:
        f.write(p.stderr)
    if p.returncode != 0:
        raise RuntimeError(
            "%s failed (exit %d):\n%s\n%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:], p.stderr[-3000:])
        )
    doc = parse(p.stdout)
    doc["wall_s"] = wall
    doc["loadavg_before"] = load
    return doc


def ensure_abi(args, env):
    """Builds what mpi4py on Spools needs and returns its library line (naming Spools)."""
    if os.path.abspath(args.abi_python) == ABI_PYTHON:
        sys.stderr.write("==> target/mpi-venv: mpi4py built against the MPI ABI (scripts/mpi-abi-env.sh)\n")
        subprocess.run(["bash", "-c", "set -e; MPI4PY=1 source scripts/mpi-abi-env.sh"], cwd=ROOT, check=True)
    sys.stderr.write("==> Spools' libmpi_abi.so.1 (make -C crates/spools-mpi)\n")
    subprocess.run(
        ["make", "--no-print-directory", "-C", os.path.join(ROOT, "crates", "spools-mpi")],
        check=True,
        stdout=sys.stderr,
    )
    lib = os.path.join(os.path.dirname(os.path.abspath(args.spools)), "libmpi_abi.so.1")
    if not os.path.exists(lib):
        raise SystemExit("run.py: %s is missing after make -C crates/spools-mpi" % lib)
    args.abi_libs = (lib, os.path.realpath(lib))
    p = subprocess.run(
        abi_prefix(args, 1) + ["-c", LIBRARY_LINE],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    line = p.stdout.strip()
    if p.returncode != 0 or not is_spools_lib(args, line):
        raise SystemExit(
            "run.py: mpi4py under spools run did not load Spools' %s: exit %d\n%s\n%s"
            % (lib, p.returncode, p.stdout, p.stderr)
        )
    return line


def abi_prefix(args, n):
    """The command of mpi4py on Spools up to the script: through env (see the docstring)."""
    return [args.spools, "run", "-n", str(n), "--", shutil.which("env") or "/usr/bin/env", args.abi_python]


def is_spools_lib(args, library):
    return "Spools" in library and any(lib in library for lib in args.abi_libs)


def check_library(args, impl, doc):
    """mpi4py-spools must have run on Spools' libmpi_abi.so.1, mpi4py on another library."""
    library = doc.get("library", "")
    if impl == "mpi4py-spools" and not is_spools_lib(args, library):
        raise RuntimeError("mpi4py on Spools did not load %s: %r" % (args.abi_libs[0], library))
    if impl == "mpi4py" and "Spools" in library:
        raise RuntimeError("mpi4py on Open MPI loaded Spools' library: %r" % library)


def host_info(args, sides, abi_library):
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "unknown"

    lines = [
        "date: %s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host: %s %s %s, %d cores" % (platform.system(), platform.release(), platform.machine(), os.cpu_count() or 0),
        "cpu: %s" % out(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]).strip(),
        "python: %s" % out([args.python, "-c", "import sys; print(sys.version.split()[0])"]),
        "numpy: %s" % out([args.python, "-c", "import numpy; print(numpy.__version__)"]),
        "mpi4py: %s" % out([args.python, "-c", "import mpi4py; print(mpi4py.__version__)"]),
        "mpi library: %s"
        % out([args.python, "-c", "from mpi4py import MPI; print(MPI.Get_library_version().replace(chr(0), '').splitlines()[0])"]),
        "mpirun: %s" % (out([args.mpirun, "--version"]).splitlines() or ["unknown"])[0],
        "spools: %s (%s)" % (out(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]), args.spools),
    ]
    if abi_library:
        lines.append(
            "mpi4py on Spools: %s with python %s, numpy %s, mpi4py %s (built against the MPI ABI); library: %s"
            % (
                args.abi_python,
                out([args.abi_python, "-c", "import sys; print(sys.version.split()[0])"]),
                out([args.abi_python, "-c", "import numpy; print(numpy.__version__)"]),
                out([args.abi_python, "-c", "import mpi4py; print(mpi4py.__version__)"]),
                abi_library,
            )
        )
    lines += [
        "load average at the start: %s" % out(["cat", "/proc/loadavg"]),
        "runs: %d, alternating %s per benchmark" % (args.runs, ", ".join(sides)),
    ]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench-python"))
    ap.add_argument("--only", default="pingpong,coll,redist")
    ap.add_argument("--spools", default=os.path.join(ROOT, "target", "release", "spools"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per job")
    ap.add_argument(
        "--sides",
        default=",".join(SIDES),
        help="which sides run, of spools, mpi4py (on Open MPI), mpi4py-spools (mpi4py on Spools through the MPI ABI); default all",
    )
    ap.add_argument(
        "--abi-python",
        default=ABI_PYTHON,
        help="the Python whose mpi4py is built against the MPI standard ABI, for mpi4py-spools (default target/mpi-venv/bin/python)",
    )
    ap.add_argument(
        "--spools-env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="also run the spools side with this setting (a third side, after the plain spools one; repeatable)",
    )
    ap.add_argument(
        "--native",
        action="store_true",
        help="with pingpong, also time 8 B without Python: `spools bench osu latency` (Rust) and "
        "bench/peers/osu.c with Open MPI (C), in the same runs",
    )
    ap.add_argument("--mpicc", default="mpicc.openmpi", help="compiler of osu.c for --native")
    args = ap.parse_args()
    tests = [t for t in args.only.split(",") if t]
    for t in tests:
        if t not in RANKS:
            ap.error("unknown benchmark %r (pingpong, coll, redist)" % t)
    sides = [s for s in args.sides.split(",") if s]
    for s in sides:
        if s not in SIDES:
            ap.error("unknown side %r (%s)" % (s, ", ".join(SIDES)))

    out = os.path.abspath(args.out)
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    # Every side runs its numpy on a single thread per rank.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    # spools run takes the libmpi_abi.so.1 beside its executable (SPOOLS_MPI_LIB would
    # name another).
    env.pop("SPOOLS_MPI_LIB", None)
    abi_library = ensure_abi(args, env) if "mpi4py-spools" in sides else None
    with open(os.path.join(out, "host.txt"), "w") as f:
        f.write(host_info(args, sides, abi_library))

    osu = os.path.join(out, "osu-openmpi")
    if args.native:
        subprocess.run([args.mpicc, "-O2", "-o", osu, os.path.join(ROOT, "bench", "peers", "osu.c")], check=True)

    samples = os.path.join(out, "runs.jsonl")
    with open(samples, "w") as f:
        for i in range(1, args.runs + 1):
            for t in tests:
                n = RANKS[t]
                spools_cmd = [args.spools, "run", "-n", str(n), "--", args.python, os.path.join(HERE, "bench_spools.py"), t]
                mpi_cmd = [args.mpirun, "--oversubscribe", "-n", str(n), args.python, os.path.join(HERE, "bench_mpi4py.py"), t]
                abi_cmd = abi_prefix(args, n) + [os.path.join(HERE, "bench_mpi4py.py"), t]
                jobs = []
                if "spools" in sides:
                    jobs.append(("spools", spools_cmd, None))
                    for setting in args.spools_env:
                        var, _, value = setting.partition("=")
                        jobs.append(("spools[%s]" % setting, spools_cmd, (var, value)))
                if "mpi4py" in sides:
                    jobs.append(("mpi4py", mpi_cmd, None))
                if "mpi4py-spools" in sides:
                    jobs.append(("mpi4py-spools", abi_cmd, None))
                if args.native and t == "pingpong":
                    osu_args = ["latency", "--max-size", "8"]
                    jobs.append(
                        ("native: spools, Rust", [args.spools, "run", "-n", "2", "--", args.spools, "bench", "osu"] + osu_args, None)
                    )
                    jobs.append(("native: Open MPI, C", [args.mpirun, "--oversubscribe", "-n", "2", osu] + osu_args, None))
                for impl, cmd, setting in jobs:
                    job_env = env
                    if setting:
                        job_env = dict(env)
                        job_env[setting[0]] = setting[1]
                    tag = "".join(ch if ch.isalnum() else "-" for ch in impl).strip("-")
                    name = "%s-%s.run%d" % (t, tag, i)
                    sys.stderr.write("  %-28s" % name)
                    sys.stderr.flush()
                    parse = parse_osu_8b(impl) if impl.startswith("native:") else parse_bench
                    doc = run_job(cmd, os.path.join(logs, name), job_env, args.timeout, parse)
                    check_library(args, impl, doc)
                    doc["impl"] = impl
                    doc["run"] = i
                    f.write(json.dumps(doc) + "\n")
                    f.flush()
                    sys.stderr.write("ok (%.1f s)\n" % doc["wall_s"])

    summary = subprocess.run(
        [sys.executable, os.path.join(HERE, "summarize.py"), samples, "--host", os.path.join(out, "host.txt")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(summary)
    sys.stdout.write(summary)


if __name__ == "__main__":
    main()
