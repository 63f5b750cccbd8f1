#!/usr/bin/env python3
"""Runs the Python benchmarks of spools and mpi4py side by side, alternating.

usage: bench/python/run.py [--runs N] [--out DIR] [--only pingpong,coll,redist]
                           [--spools BIN] [--mpirun BIN] [--python BIN]
                           [--sides spools,mpi4py] [--spools-env VAR=VALUE] [--native]
                           [--mpicc BIN] [--timeout SECONDS]

scripts/bench-python.sh builds and installs everything, then calls this. Per run and per
benchmark, the spools program runs first (`spools run -n N -- python bench_spools.py
TEST`), then the mpi4py program (`mpirun --oversubscribe -n N python bench_mpi4py.py
TEST`), so the two sides alternate: spools, mpi4py, spools, mpi4py, ... Every sample goes
to DIR/runs.jsonl, every job's output to DIR/logs/, and summarize.py writes DIR/summary.md
(medians over the runs, ratios, goals).

Benchmarks (names for --only): pingpong (2 ranks: 8 B and 1 MiB), coll (4 ranks:
allreduce 8 B and 1 MiB, bcast 1 MiB), redist (4 ranks: 2048x2048 float64 block -> cyclic).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RANKS = {"pingpong": 2, "coll": 4, "redist": 4}


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


def host_info(args):
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
        "load average at the start: %s" % out(["cat", "/proc/loadavg"]),
        "runs: %d, alternating spools then mpi4py per benchmark" % args.runs,
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
    ap.add_argument("--sides", default="spools,mpi4py", help="which sides run (default both)")
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

    out = os.path.abspath(args.out)
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    with open(os.path.join(out, "host.txt"), "w") as f:
        f.write(host_info(args))
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    # Both sides import the same numpy and run on a single thread each.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")

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
                sides = []
                if "spools" in args.sides.split(","):
                    sides.append(("spools", spools_cmd, None))
                    for setting in args.spools_env:
                        var, _, value = setting.partition("=")
                        sides.append(("spools[%s]" % setting, spools_cmd, (var, value)))
                if "mpi4py" in args.sides.split(","):
                    sides.append(("mpi4py", mpi_cmd, None))
                if args.native and t == "pingpong":
                    osu_args = ["latency", "--max-size", "8"]
                    sides.append(
                        ("native: spools, Rust", [args.spools, "run", "-n", "2", "--", args.spools, "bench", "osu"] + osu_args, None)
                    )
                    sides.append(("native: Open MPI, C", [args.mpirun, "--oversubscribe", "-n", "2", osu] + osu_args, None))
                for impl, cmd, setting in sides:
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
