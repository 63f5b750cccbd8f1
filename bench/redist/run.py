#!/usr/bin/env python3
"""In-memory redistribution: Spools beside ScaLAPACK's pdgemr2d and memcpy, in the same run.

usage: bench/redist/run.py [--runs N] [--ranks 4,8] [--cases C,...] [--reps K] [--out DIR]
                           [--ring] [--no-build | --spools PATH]

Installs what is missing from Debian's packages (Open MPI through scripts/install-mpi.sh;
ScaLAPACK: libscalapack-openmpi-dev, with sudo when not root), builds the ScaLAPACK peer
(bench/peers/redist.c, mpicc -O2, into DIR/redist_scalapack) and `spools` (cargo build
--release -p spools-cli, unless --no-build or --spools PATH names a binary), then runs N
rounds (default 5): in each, for every case and rank count, one after the other,
`spools run -n P -- spools bench redist ... --json` with ordinary buffers, `mpirun -np P
redist_scalapack ...` on the same distribution, Spools again with shared-heap buffers when
`spools bench redist --help` lists --heap, and with --ring once more with ordinary buffers
and the single copy off (--no-single-copy: what the single copy brings). Every program
times the median of K repetitions (default 5) and one memcpy of the dataset's bytes by one
rank between them; every job is bounded (600 s).

Cases (names for --cases), a column-major f64[2048,2048] (32 MiB) on P = 4 and 8 ranks:
  row-col     block rows (block,* on Px1) -> block columns (*,block on 1xP): runs of 2048/P
              elements (4 KiB with 4 ranks)
  block-cyc64 block rows -> rows dealt cyclic(64) (cyclic(64),* on Px1): runs of 512 B
  block-cyc1  block rows -> rows dealt one by one (cyclic,* on Px1): runs of 8 B
Spools is given the layout strings (order=F), ScaLAPACK the same distributions as BLACS grids
and block sizes (block = blocks of ceil(n/p)); both count the contiguous runs of the plan, and
a case whose two counts differ is reported as a mismatch.

Writes every document to DIR/docs/NAME.runI.json (stderr of each program in DIR/logs/),
every sample to DIR/results.json (with the 1-minute load average before its job), then runs
bench/redist/summarize.py: DIR/summary.md (medians, ratios, the issue's goals with
PASS/MISS) and DIR/redist.svg. Default DIR: target/bench-redist under the repository root.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS = os.path.join(ROOT, "bench", "peers")
M = N = 2048

# The cases: name -> (Spools from, Spools to, ScaLAPACK from, ScaLAPACK to) for P ranks, a
# ScaLAPACK distribution being (grid, blocks) as "RxC" strings.
CASES = {
    "row-col": lambda p: (
        f"f64[{M},{N}] block,* on {p}x1 order=F",
        f"f64[{M},{N}] *,block on 1x{p} order=F",
        (f"{p}x1", f"{-(-M // p)}x{N}"),
        (f"1x{p}", f"{M}x{-(-N // p)}"),
    ),
    "block-cyc64": lambda p: (
        f"f64[{M},{N}] block,* on {p}x1 order=F",
        f"f64[{M},{N}] cyclic(64),* on {p}x1 order=F",
        (f"{p}x1", f"{-(-M // p)}x{N}"),
        (f"{p}x1", f"64x{N}"),
    ),
    "block-cyc1": lambda p: (
        f"f64[{M},{N}] block,* on {p}x1 order=F",
        f"f64[{M},{N}] cyclic,* on {p}x1 order=F",
        (f"{p}x1", f"{-(-M // p)}x{N}"),
        (f"{p}x1", f"1x{N}"),
    ),
}


def log(msg):
    print(f"==> {msg}", file=sys.stderr, flush=True)


def sh(cmd, timeout=900, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def as_root(cmd):
    return cmd if os.geteuid() == 0 else ["sudo", "-n"] + cmd


def apt_install(packages):
    log(f"installing {' '.join(packages)} with apt-get")
    env = ["env", "DEBIAN_FRONTEND=noninteractive"]
    sh(as_root(["apt-get", "update"]), timeout=1800)
    sh(as_root(env + ["apt-get", "install", "-y"] + packages), timeout=1800)


def tools():
    """Open MPI's compiler and launcher (scripts/install-mpi.sh installs them when missing),
    by their explicit Debian names when those exist."""
    sh(["bash", os.path.join(ROOT, "scripts", "install-mpi.sh")], timeout=1800)
    mpicc = shutil.which("mpicc.openmpi") or shutil.which("mpicc")
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    if mpicc is None or mpirun is None:
        raise RuntimeError("mpicc/mpirun still missing after scripts/install-mpi.sh")
    return mpicc, mpirun


def build_peer(mpicc, out):
    """Builds redist.c against Debian's ScaLAPACK, installing it when the link fails."""
    exe = os.path.join(out, "redist_scalapack")
    cmd = [mpicc, "-O2", "-Wall", "-Wextra", "-o", exe, os.path.join(PEERS, "redist.c"), "-lscalapack-openmpi"]
    if sh(cmd, check=False).returncode != 0:
        apt_install(["libscalapack-openmpi-dev"])
        sh(cmd)
    return exe


def build_spools(no_build, given):
    if given:
        no_build = True
    spools = given or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "spools")
    if not no_build:
        log("building spools (cargo build --release -p spools-cli)")
        sh(["cargo", "build", "--release", "-p", "spools-cli"], timeout=3600)
    if not os.access(spools, os.X_OK):
        raise RuntimeError(f"{spools} is not there (build it, or drop --no-build)")
    return os.path.abspath(spools)


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("benchmark") == "redist":
                return doc
    return None


class Runner:
    def __init__(self, out, spools, peer, mpirun, reps):
        self.out, self.spools, self.peer, self.reps = out, spools, peer, reps
        self.mpirun = [mpirun, "--allow-run-as-root", "--oversubscribe", "--timeout", "600"]
        for d in ("docs", "logs"):
            os.makedirs(os.path.join(out, d), exist_ok=True)
        self.samples = []

    def run(self, name, cmd, key):
        """Runs one program, keeps its document and adds it to the samples under key."""
        t, load = time.time(), os.getloadavg()[0]
        print(f"  {name:44}", end="", file=sys.stderr, flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        with open(os.path.join(self.out, "logs", name + ".log"), "w") as fh:
            fh.write(p.stderr)
        doc = last_json(p.stdout)
        if p.returncode != 0 or doc is None:
            print("FAILED", file=sys.stderr)
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        with open(os.path.join(self.out, "docs", name + ".json"), "w") as fh:
            json.dump(doc, fh)
            fh.write("\n")
        self.samples.append({"case": key[0], "ranks": key[1], "system": key[2], "load": load, "doc": doc})
        print(f"ok ({time.time() - t:.0f} s)", file=sys.stderr)

    def spools_cmd(self, p, a, b, extra):
        return [self.spools, "run", "-n", str(p), "--timeout", "600", "--", self.spools, "bench", "redist",
                "--from", a, "--to", b, "--reps", str(self.reps), "--json"] + extra

    def peer_cmd(self, p, a, b, sa, sb):
        return self.mpirun + ["-np", str(p), self.peer, "--m", str(M), "--n", str(N),
                              "--from-grid", sa[0], "--from-block", sa[1], "--to-grid", sb[0], "--to-block", sb[1],
                              "--reps", str(self.reps), "--from", a, "--to", b]

    def round(self, i, cases, ranks, variants):
        """Round i: per case and rank count, Spools with ordinary buffers, pdgemr2d, then
        every further Spools variant (system name, extra flags)."""
        for case in cases:
            for p in ranks:
                a, b, sa, sb = CASES[case](p)
                tag = f"{case}-P{p}.run{i}"
                self.run(f"spools-{tag}", self.spools_cmd(p, a, b, []), (case, p, "spools"))
                self.run(f"scalapack-{tag}", self.peer_cmd(p, a, b, sa, sb), (case, p, "scalapack"))
                for system, extra in variants:
                    self.run(f"{system}-{tag}", self.spools_cmd(p, a, b, extra), (case, p, system))

    def save(self):
        with open(os.path.join(self.out, "results.json"), "w") as fh:
            json.dump(self.samples, fh, indent=1)


def host(out, mpirun, variants, spools):
    commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).stdout.strip() or "unknown"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown CPU")
    lines = [
        f"date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        f"host: {os.uname().sysname} {os.uname().release}, {os.cpu_count()} cores, {cpu}",
        f"open mpi: {(sh([mpirun, '--version'], check=False).stdout.splitlines() or ['unknown'])[0]}",
        f"scalapack: {sh(['dpkg-query', '-W', '-f', '${Version}', 'libscalapack-openmpi-dev'], check=False).stdout or 'unknown'}",
        f"spools: {spools} (repository at {commit})",
        f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"spools variants beside ordinary buffers: {', '.join(f'{n} ({chr(32).join(x)})' for n, x in variants) or 'none'}",
    ]
    with open(os.path.join(out, "host.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="rounds, alternating the programs (default 5)")
    ap.add_argument("--ranks", default="4,8", help="rank counts, comma-separated (default 4,8)")
    ap.add_argument("--cases", default=",".join(CASES), help="cases, comma-separated (default all)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions inside each program (default 5)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench-redist"))
    ap.add_argument("--no-build", action="store_true", help="use the spools already built")
    ap.add_argument("--ring", action="store_true", help="also ordinary buffers with the single copy off (--no-single-copy)")
    ap.add_argument("--spools", metavar="PATH", help="use this spools binary (another build or branch; implies --no-build)")
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad or not cases:
        ap.error(f"unknown case(s) {', '.join(bad) or '(none)'}; known: {', '.join(CASES)}")
    try:
        ranks = [int(p) for p in a.ranks.split(",")]
    except ValueError:
        ap.error(f"--ranks: expected comma-separated whole numbers, got {a.ranks!r}")
    if any(p < 1 for p in ranks) or a.runs < 1 or a.reps < 1:
        ap.error("--ranks, --runs and --reps must be at least 1")
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)

    mpicc, mpirun = tools()
    peer = build_peer(mpicc, out)
    spools = build_spools(a.no_build, a.spools)
    helptext = sh([spools, "bench", "redist", "--help"]).stdout
    variants = [("spools-heap", ["--heap"])] if "--heap" in helptext else []
    log(f"shared-heap buffers: {'yes' if variants else 'no (no --heap in spools bench redist --help)'}")
    if a.ring:
        if "--no-single-copy" not in helptext:
            ap.error("--ring: this spools bench redist has no --no-single-copy")
        variants.append(("spools-ring", ["--no-single-copy"]))
    host(out, mpirun, variants, spools)
    r = Runner(out, spools, peer, mpirun, a.reps)
    for i in range(1, a.runs + 1):
        log(f"round {i} of {a.runs}")
        r.round(i, cases, ranks, variants)
        r.save()
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), out], check=True)


if __name__ == "__main__":
    main()
