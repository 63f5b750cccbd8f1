#!/usr/bin/env python3
"""Parallel-I/O benchmarks of Spools, side by side with peers in the same run.

usage: bench/io/run.py [--runs N] [--out DIR] [--quick] [--only A,B,...]

`--only formats` installs libhdf5 (scripts/install-hdf5.sh), which spools loads at run time.

Builds `spools` (cargo build --release) and the MPI-IO peer (bench/peers/io.c, mpicc -O2;
Open MPI is installed from Debian if missing), then runs every experiment N times (default
5), alternating the systems compared within each run, and writes DIR/results.json (every
sample), DIR/summary.md (medians, ratios, goals) and DIR/*.svg plots.

Experiments (names for --only):
  redist   in-memory redistribution (block -> cyclic(k), transposed grids) vs memcpy
  collperf SCI-MPICH Table 3: 3-D BLOCK i32 n^3 (n = 128, 512) by 2 and 4 ranks, collective
           write then read of the canonical file, vs MPI-IO (OMPIO and ROMIO, darray view),
           buffered and durable (sync inside the timed region), vs a raw sequential write
           (dd) of the same bytes; the files are compared byte for byte
  readn    read with a different number of ranks vs the same number
  raid     RAID-5 vs RAID-0 write time; degraded (one unit deleted) vs healthy RAID-5 read
  units    nCUBE Table 3: striped over 1, 2, 4 unit files
  fig15    iWarp Figure 15: writing a block-cyclic array, block 128 B .. 8 KiB, with and
           without reshuffling, vs raw streaming (dd)
  pipes    nCUBE Tables 1/2: parallel pipe bandwidth, s = r = 1, 2, 4, 8, row/column/block
           on both sides, 1024x1024 and 8192x8192 u8
  formats  Zarr v3 and HDF5: writing and reading f32[512,512,512] with 4 ranks as Zarr
           (shards of 256^3, chunks of 64^3, raw and zstd level 1, a CRC32C per chunk)
           against zarr-python (one process) and the zarrs crate (one process, its own
           threads; crates/spools-io/examples/zarrs_peer.rs), and as HDF5 (one contiguous
           dataset) against the canonical file of the same bytes, h5py (serial) and
           parallel HDF5 with MPI-IO (bench/peers/phdf5.c against Debian's
           libhdf5-openmpi-dev, 4 ranks, collective); every file is written fresh
           (--quick: 256^3)
  shortruns single-element runs against long runs: i64 and i32 vectors cyclic (every run one
           element) against block on 2 and 4 ranks, 64 MiB, written and read as a canonical
           and a raid5(unit=64KiB,count=5) file (spools bench io), and through a parallel pipe
           from block to cyclic against block to block (spools bench pipe); the goal is a
           ratio of bandwidths >= 0.2 (--quick: 8 MiB, 2 ranks)
  shapes   single-element runs in N-d shapes: 2-D and 3-D arrays whose fastest dimension is
           cyclic (rows of 999 elements that no stripe unit divides, a 2-D grid, Fortran order)
           against row blocks of the same array, at 2, 3 and 4 ranks, through canonical, .npy,
           RAID-0, RAID-5 (and its read with a unit file deleted), Zarr and a pipe from row
           blocks; 32 MiB each (--quick: 8 MiB, 3 ranks); the goal is a ratio >= 0.2
  rss      memory: peak resident set (VmHWM) of each rank writing a 4 GiB canonical file
           (i32[1024,1024,1024] in 2x2x1 blocks) with 4 ranks, as chosen (--reshuffle auto:
           direct here) and through aggregators (--reshuffle always), against the goal "own
           data (1 GiB) + 64 MiB"; skipped with a message when the disk holding DIR has less than
           10 GiB free or the machine less than 10 GiB of available memory (--quick: 512 MiB)

All files are overwritten in place after a first untimed write (this machine writes fresh
files far slower than it overwrites, see the issue); `collperf` also reports fresh-file
writes for one configuration. Files live in DIR/files (on the disk holding DIR).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPOOLS = os.path.join(ROOT, "target", "release", "spools")



CP_REPS = 3  # repetitions of each coll_perf program in one job (median reported)

def sh(cmd, env=None, timeout=900):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON in output:\n{text}")


def spools_run(n, args, env=None):
    return sh([SPOOLS, "run", "-n", str(n), "--timeout", "600", "--", SPOOLS] + args, env=env)


def mpirun(n, args, component):
    return sh(["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "io", component, "-n", str(n)] + args)


def med(v):
    return statistics.median(v) if v else float("nan")


def dd(path, nbytes, sync):
    bs = 4 << 20
    count = max(1, nbytes // bs)
    conv = "notrunc,fdatasync" if sync else "notrunc"
    t = time.perf_counter()
    sh(["dd", "if=/dev/zero", f"of={path}", f"bs={bs}", f"count={count}", f"conv={conv}", "status=none"])
    return time.perf_counter() - t


def mem_available():
    """MemAvailable of /proc/meminfo in bytes, None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def layout_bytes(spec):
    """Bytes of a layout spec's dataset ("T[a,b,...] ...")."""
    t, rest = spec.split("[", 1)
    dims = rest.split("]", 1)[0].split(",")
    size = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8}[t]
    for d in dims:
        size *= int(d)
    return size


def grid3(p):
    return {1: "1x1x1", 2: "2x1x1", 4: "2x2x1", 8: "2x2x2"}[p]


class Bench:
    def __init__(self, out, runs, quick):
        self.out, self.runs, self.quick = out, runs, quick
        self.files = os.path.join(out, "files")
        os.makedirs(self.files, exist_ok=True)
        self.samples = {}

    def add(self, key, value):
        self.samples.setdefault(key, []).append(value)

    def m(self, key):
        return med(self.samples.get(key, []))

    def f(self, name):
        return os.path.join(self.files, name)

    # --- experiments -------------------------------------------------------------------
    def redist(self):
        n = 1 << 20 if self.quick else 1 << 22
        cases = [
            ("block->cyclic(512) f64 (4 KiB runs)", f"f64[{n}] block on 4", f"f64[{n}] cyclic(512) on 4"),
            ("block->cyclic(1) f64 (8 B runs)", f"f64[{n}] block on 4", f"f64[{n}] cyclic on 4"),
            ("rows->columns f64[2048,2048] (4 KiB runs)", "f64[2048,2048] block,* on 4x1", "f64[2048,2048] *,block on 1x4"),
            ("2x2 blocks->columns f64[2048,2048]", "f64[2048,2048] block,block on 2x2", "f64[2048,2048] *,block on 1x4"),
        ]
        for _ in range(self.runs):
            for name, a, b in cases:
                r = last_json(spools_run(4, ["bench", "redist", "--from", a, "--to", b, "--json", "--reps", "5"]).stdout)
                self.add(("redist", name, "ratio"), r["ratio"])
                self.add(("redist", name, "gb_s"), r["redistribute_gb_s"])
                self.add(("redist", name, "memcpy_gb_s"), r["memcpy_gb_s"])
                self.add(("redist", name, "mean_run"), r["mean_run_bytes"])

    # Each coll_perf program (Spools and MPI-IO alike) writes and reads CP_REPS times in one
    # job and reports the median: the steady state, not the job's first call alone (which
    # also pays one-time costs: connections, first-touch of buffers).
    def collperf(self):
        sizes = [128] if self.quick else [128, 512]
        peer = os.path.join(self.out, "io_peer")
        for _ in range(self.runs):
            for n in sizes:
                for p in (2, 4):
                    layout = f"i32[{n},{n},{n}] block,block,block on {grid3(p)}"
                    nbytes = n * n * n * 4
                    for sync in (False, True):
                        mode = "durable" if sync else "buffered"
                        s = ["--sync"] if sync else []
                        # Spools' default (atomic replacement), then written in place as MPI-IO does.
                        for name, extra in (("spools", []), ("spools-inplace", ["--in-place"])):
                            fs = self.f(f"cp-{name}-{n}")
                            r = last_json(spools_run(p, ["bench", "io", "--layout", layout, "--file", fs, "--write", "--read", "--verify", "--keep", "--reps", str(CP_REPS), "--json"] + s + extra).stdout)
                            self.add(("collperf", n, p, mode, name, "write"), r["write"]["median_s"])
                            self.add(("collperf", n, p, mode, name, "read"), r["read"]["median_s"])
                        for comp in ("ompio", "romio321"):
                            fm = self.f(f"cp-{comp}-{n}")
                            r = last_json(mpirun(p, [peer, "--n", str(n), "--file", fm, "--reps", str(CP_REPS), "--keep"] + s, comp).stdout)
                            self.add(("collperf", n, p, mode, comp, "write"), statistics.median(r["write_s"]))
                            self.add(("collperf", n, p, mode, comp, "read"), statistics.median(r["read_s"]))
                        self.add(("collperf", n, p, mode, "raw", "write"), dd(self.f(f"cp-raw-{n}"), nbytes, sync))
            for n in sizes:
                a, b, c = self.f(f"cp-spools-{n}"), self.f(f"cp-ompio-{n}"), self.f(f"cp-romio321-{n}")
                same = all(subprocess.run(["cmp", a, x]).returncode == 0 for x in (b, c, self.f(f"cp-spools-inplace-{n}")))
                self.add(("collperf", n, "identical"), same)
        # Fresh files: the same write into a file that does not exist yet.
        n, p = 128, 4
        layout = f"i32[{n},{n},{n}] block,block,block on {grid3(p)}"
        for _ in range(self.runs):
            fs = self.f("cp-fresh")
            if os.path.exists(fs):
                os.remove(fs)
            r = last_json(spools_run(p, ["bench", "io", "--layout", layout, "--file", fs, "--write", "--reps", "1", "--json"]).stdout)
            self.add(("collperf", "fresh", n, p, "spools"), r["write"]["median_s"])
            fm = self.f("cp-fresh-mpi")
            if os.path.exists(fm):
                os.remove(fm)
            r = last_json(mpirun(p, [os.path.join(self.out, "io_peer"), "--n", str(n), "--file", fm, "--reps", "1"], "ompio").stdout)
            self.add(("collperf", "fresh", n, p, "ompio"), r["write_s"][0])

    def readn(self):
        n = 256 if self.quick else 512
        f = self.f("readn")
        spools_run(4, ["bench", "io", "--layout", f"i32[{n},{n},{n}] block,block,block on 2x2x1", "--file", f, "--write", "--keep", "--reps", "1"])
        for _ in range(self.runs):
            for ranks, layout in ((4, f"i32[{n},{n},{n}] block,block,block on 2x2x1"), (3, f"i32[{n},{n},{n}] block,*,* on 3x1x1"), (3, f"i32[{n},{n},{n}] *,cyclic(5),* on 1x3x1")):
                r = last_json(spools_run(ranks, ["bench", "io", "--layout", layout, "--file", f, "--read", "--verify", "--keep", "--reps", "1", "--json"]).stdout)
                self.add(("readn", ranks, layout), r["read"]["median_s"])

    def raid(self):
        n = 256 if self.quick else 512
        layout = f"i32[{n},{n},{n}] block,*,* on 4x1x1"
        dirs = ",".join(self.f(f"raid-d{i}") for i in range(4))
        for _ in range(self.runs):
            # 4 units (the point: parity is a third more bytes) and 8 (a seventh).
            for fmt in ("stripe(unit=1MiB,count=4)", "raid5(unit=1MiB,count=4)", "stripe(unit=1MiB,count=8)", "raid5(unit=1MiB,count=8)"):
                f = self.f("raid-" + fmt[:5] + ("" if "count=4" in fmt else "-8"))
                r = last_json(spools_run(4, ["bench", "io", "--layout", layout, "--file", f, "--format", fmt, "--dirs", dirs, "--write", "--read", "--verify", "--keep", "--reps", "2", "--sync", "--json"]).stdout)
                self.add(("raid", fmt, "write"), min(r["write"]["runs_s"]))
                self.add(("raid", fmt, "read"), min(r["read"]["runs_s"]))
            # Degraded: unit 2 of the current RAID-5 version deleted, then put back by repair.
            f = self.f("raid-raid5")
            m = json.load(open(f))
            unit = m["units"][2]["path"]
            os.remove(unit if os.path.isabs(unit) else os.path.join(os.path.dirname(f), unit))
            r = last_json(spools_run(4, ["bench", "io", "--layout", layout, "--file", f, "--read", "--verify", "--keep", "--reps", "1", "--json"]).stdout)
            self.add(("raid", "degraded", "read"), r["read"]["median_s"])
            sh([SPOOLS, "repair", f])

    def units(self):
        n = 256 if self.quick else 512
        layout = f"i32[{n},{n},{n}] block,*,* on 4x1x1"
        for _ in range(self.runs):
            for k in (1, 2, 4):
                dirs = ",".join(self.f(f"units-d{i}") for i in range(k))
                f = self.f(f"units-{k}")
                r = last_json(spools_run(4, ["bench", "io", "--layout", layout, "--file", f, "--format", f"stripe(unit=1MiB,count={k})", "--dirs", dirs, "--write", "--read", "--keep", "--reps", "2", "--json"]).stdout)
                self.add(("units", k, "write"), min(r["write"]["runs_s"]))
                self.add(("units", k, "read"), min(r["read"]["runs_s"]))

    def fig15(self):
        size = (16 if self.quick else 64) << 20
        for _ in range(self.runs):
            for b in (128, 512, 2048, 8192):
                layout = f"u8[{size}] cyclic({b}) on 4"
                for mode in ("always", "never"):
                    f = self.f(f"fig15-{mode}")
                    r = last_json(spools_run(4, ["bench", "io", "--layout", layout, "--file", f, "--write", "--keep", "--reps", "2", "--reshuffle", mode, "--json"]).stdout)
                    self.add(("fig15", b, mode), min(r["write"]["runs_s"]))
            self.add(("fig15", "raw"), dd(self.f("fig15-raw"), size, False))

    def pipes(self):
        sizes = [1024] if self.quick else [1024, 8192]
        dists = {"row": lambda p: ("block,*", f"{p}x1"), "col": lambda p: ("*,block", f"1x{p}"),
                 "block": lambda p: ("block,block", {1: "1x1", 2: "2x1", 4: "2x2", 8: "4x2"}[p])}
        env = {"SPOOLS_PIPE_DIR": self.f("pipes"), "SPOOLS_PIPE_TIMEOUT": "120"}
        for _ in range(self.runs):
            for n in sizes:
                combos = [(a, b) for a in dists for b in dists] if n == 1024 else [("row", "row"), ("row", "col"), ("block", "block")]
                records = 21 if n == 1024 else 4
                for p in (1, 2, 4, 8):
                    for a, b in combos:
                        da, ga = dists[a](p)
                        db, gb = dists[b](p)
                        name = f"pipe:bench-{n}-{p}-{a}-{b}"
                        e = dict(os.environ)
                        e.update(env)
                        prod = subprocess.Popen([SPOOLS, "run", "-n", str(p), "--timeout", "600", "--", SPOOLS, "bench", "pipe", "--role", "producer", "--layout", f"u8[{n},{n}] {da} on {ga}", "--name", name, "--records", str(records), "--json"], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                        cons = sh([SPOOLS, "run", "-n", str(p), "--timeout", "600", "--", SPOOLS, "bench", "pipe", "--role", "consumer", "--layout", f"u8[{n},{n}] {db} on {gb}", "--name", name, "--records", str(records), "--json"], env=env)
                        _, perr = prod.communicate(timeout=600)
                        if prod.returncode != 0:
                            raise RuntimeError(f"pipe producer failed: {perr}")
                        r = last_json(cons.stderr)
                        self.add(("pipes", n, p, a, b), r["mb_per_s"])

    def shortruns(self):
        """Single-element runs against long runs of the same kind: i64 and i32 vectors
        `cyclic on P` (every run one element) against `block on P`, written and read as a
        canonical file and a RAID-5 file, and through a parallel pipe (the producer `block`,
        the consumer `cyclic`, against both `block`)."""
        mib = 8 if self.quick else 64
        ranks = (2,) if self.quick else (2, 4)
        env = {"SPOOLS_PIPE_DIR": self.f("pipes"), "SPOOLS_PIPE_TIMEOUT": "120"}
        for _ in range(self.runs):
            for p in ranks:
                for t, e in (("i64", 8), ("i32", 4)):
                    n = (mib << 20) // e
                    for fmt in ("canonical", "raid5(unit=64KiB,count=5)"):
                        kind = "plain" if fmt == "canonical" else "raid5"
                        for dist in ("block", "cyclic"):
                            f = self.f(f"runs-{kind}")
                            r = last_json(spools_run(p, ["bench", "io", "--layout", f"{t}[{n}] {dist} on {p}", "--file", f, "--format", fmt, "--write", "--read", "--keep", "--reps", "3", "--json"]).stdout)
                            self.add(("shortruns", kind, p, t, dist, "write"), r["write"]["median_s"])
                            self.add(("shortruns", kind, p, t, dist, "read"), r["read"]["median_s"])
                    for dist in ("block", "cyclic"):
                        name = f"pipe:runs-{p}-{t}-{dist}"
                        e2 = dict(os.environ)
                        e2.update(env)
                        records = 6
                        prod = subprocess.Popen([SPOOLS, "run", "-n", str(p), "--timeout", "600", "--", SPOOLS, "bench", "pipe", "--role", "producer", "--layout", f"{t}[{n}] block on {p}", "--name", name, "--records", str(records), "--json"], env=e2, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                        cons = sh([SPOOLS, "run", "-n", str(p), "--timeout", "600", "--", SPOOLS, "bench", "pipe", "--role", "consumer", "--layout", f"{t}[{n}] {dist} on {p}", "--name", name, "--records", str(records), "--json"], env=env)
                        _, perr = prod.communicate(timeout=600)
                        if prod.returncode != 0:
                            raise RuntimeError(f"pipe producer failed: {perr}")
                        r = last_json(cons.stderr)
                        # Seconds per record, so that a ratio of times is a ratio of bandwidths.
                        self.add(("shortruns", "pipe", p, t, dist, "read"), (mib << 20) / (r["mb_per_s"] * 1e6))

    def shapes(self):
        """Single-element runs in N-d shapes (issue 62): each shape's short-run layout
        against the row blocks of the same array, written and read through every format
        (canonical, .npy, RAID-0, RAID-5 and its degraded read, Zarr), and through a
        parallel pipe from row blocks, at 2, 3 and 4 ranks; the goal is a ratio of
        bandwidths >= 0.2."""
        mib = 8 if self.quick else 32
        ranks = (3,) if self.quick else (2, 3, 4)
        env = {"SPOOLS_PIPE_DIR": self.f("pipes"), "SPOOLS_PIPE_TIMEOUT": "120"}
        for _ in range(self.runs):
            for p in ranks:
                g2 = {2: "1x2", 3: "1x3", 4: "2x2"}[p]
                n999 = (mib << 20) // (999 * 4)
                n1k = (mib << 20) // (1024 * 8)
                n3 = (mib << 20) // (250 * 250 * 4)
                shapes = [
                    ("2-D i32 *,cyclic (rows of 999)", f"i32[{n999},999] *,cyclic on 1x{p}", f"i32[{n999},999] block,* on {p}x1", "64x999"),
                    ("2-D f64 *,cyclic", f"f64[{n1k},1024] *,cyclic on 1x{p}", f"f64[{n1k},1024] block,* on {p}x1", "64x1024"),
                    (f"2-D f64 cyclic,cyclic on {g2}", f"f64[{n1k},1024] cyclic,cyclic on {g2}", f"f64[{n1k},1024] block,* on {p}x1", "64x1024"),
                    ("3-D i32 *,*,cyclic", f"i32[{n3},250,250] *,*,cyclic on 1x1x{p}", f"i32[{n3},250,250] block,*,* on {p}x1x1", "4x250x250"),
                    ("2-D i32 order=F cyclic,*", f"i32[999,{n999}] cyclic,* on {p}x1 order=F", f"i32[999,{n999}] *,block on 1x{p} order=F", "999x64"),
                ]
                formats = [("canonical", "canonical"), ("npy", "npy"), ("raid0", f"stripe(unit=64KiB,count={p + 1})"),
                           ("raid5", "raid5(unit=64KiB,count=5)"), ("zarr", None)]
                for name, short, rows, chunk in shapes:
                    for kind, fmt in formats:
                        if fmt is None:
                            fmt = f"zarr(chunk={chunk},codec=none)"
                        for dist, lay in (("rows", rows), ("short", short)):
                            f = self.f(f"shapes-{kind}")
                            r = last_json(spools_run(p, ["bench", "io", "--layout", lay, "--file", f, "--format", fmt, "--write", "--read", "--keep", "--reps", "3", "--json"]).stdout)
                            self.add(("shapes", name, kind, p, dist, "write"), r["write"]["median_s"])
                            self.add(("shapes", name, kind, p, dist, "read"), r["read"]["median_s"])
                            if kind == "raid5":
                                with open(f) as fh:
                                    unit = json.load(fh)["units"][1]["path"]
                                os.remove(os.path.join(os.path.dirname(f), unit))
                                r = last_json(spools_run(p, ["bench", "io", "--layout", lay, "--file", f, "--format", fmt, "--read", "--reps", "3", "--json"]).stdout)
                                self.add(("shapes", name, "raid5 degraded", p, dist, "read"), r["read"]["median_s"])
                    for dist, lay in (("rows", rows), ("short", short)):
                        pname = f"pipe:shapes-{p}-{dist}"
                        e2 = dict(os.environ)
                        e2.update(env)
                        records = 4
                        prod = subprocess.Popen([SPOOLS, "run", "-n", str(p), "--timeout", "600", "--", SPOOLS, "bench", "pipe", "--role", "producer", "--layout", rows, "--name", pname, "--records", str(records), "--json"], env=e2, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                        cons = sh([SPOOLS, "run", "-n", str(p), "--timeout", "600", "--", SPOOLS, "bench", "pipe", "--role", "consumer", "--layout", lay, "--name", pname, "--records", str(records), "--json"], env=env)
                        _, perr = prod.communicate(timeout=600)
                        if prod.returncode != 0:
                            raise RuntimeError(f"pipe producer failed: {perr}")
                        r = last_json(cons.stderr)
                        total = layout_bytes(rows)
                        self.add(("shapes", name, "pipe", p, dist, "read"), total / (r["mb_per_s"] * 1e6))

    def rss(self):
        n = 512 if self.quick else 1024
        layout = f"i32[{n},{n},{n}] block,block,block on 2x2x1"
        nbytes = n * n * n * 4
        need = max(10 << 30, 2 * nbytes)
        free = shutil.disk_usage(self.files).free
        avail = mem_available()
        if free < need or (avail is not None and avail < need):
            why = f"{free / 2**30:.1f} GiB free on the disk of {self.files}, {avail / 2**30 if avail else float('nan'):.1f} GiB of memory available; {need / 2**30:.0f} GiB of each needed"
            print(f"rss: skipped: {why}", file=sys.stderr)
            self.add(("rss", "skipped"), why)
            return
        f = self.f("rss")
        try:
            for _ in range(self.runs):
                for mode in ("auto", "always"):
                    if os.path.exists(f):
                        os.remove(f)
                    r = last_json(spools_run(4, ["bench", "io", "--layout", layout, "--file", f, "--write", "--reps", "1", "--reshuffle", mode, "--json"]).stdout)
                    self.add(("rss", "bytes"), nbytes)
                    self.add(("rss", mode, "write_s"), r["write"]["median_s"])
                    self.add(("rss", mode, "two_phase"), r["write"]["reshuffled"])
                    for rank, mem in enumerate(r["memory"]):
                        if mem["peak_rss_kib"] is not None:
                            self.add(("rss", mode, rank, "peak_kib"), mem["peak_rss_kib"])
                            self.add(("rss", mode, rank, "buffer_bytes"), mem["buffer_bytes"])
        finally:
            if os.path.exists(f):
                os.remove(f)

    def formats(self):
        n = 256 if self.quick else 512
        shard, chunk = n // 2, 64
        layout = f"f32[{n},{n},{n}] block,*,* on 4x1x1"
        py = os.path.join(ROOT, "target", "bench-venv", "bin", "python")
        peer_py = os.path.join(ROOT, "bench", "peers", "formats_py.py")
        zarrs = os.path.join(ROOT, "target", "release", "examples", "zarrs_peer")
        phdf5 = os.path.join(self.out, "phdf5")

        def seconds(p):
            return last_json(p.stdout)["seconds"]

        def spools_io(fmt, f):
            if os.path.isdir(f):
                shutil.rmtree(f)
            elif os.path.exists(f):
                os.remove(f)
            r = last_json(spools_run(4, ["bench", "io", "--layout", layout, "--file", f, "--format", fmt, "--write", "--read", "--verify", "--keep", "--reps", "1", "--json"]).stdout)
            return r["write"]["median_s"], r["read"]["median_s"]

        for _ in range(self.runs):
            for codec in ("none", "zstd"):
                spec = f"chunk={chunk}x{chunk}x{chunk},shard={shard}x{shard}x{shard}" + (",codec=zstd,level=1" if codec == "zstd" else "")
                w, r = spools_io(f"zarr({spec})", self.f(f"zarr-spools-{codec}"))
                self.add(("formats", "zarr", codec, "spools", "write"), w)
                self.add(("formats", "zarr", codec, "spools", "read"), r)
                f = self.f(f"zarr-py-{codec}")
                self.add(("formats", "zarr", codec, "zarr-python", "write"), seconds(sh([py, peer_py, "zarr", "write", f, str(n), str(shard), str(chunk), codec])))
                self.add(("formats", "zarr", codec, "zarr-python", "read"), seconds(sh([py, peer_py, "zarr", "read", f, str(n), str(shard), str(chunk), codec])))
                f = self.f(f"zarr-zarrs-{codec}")
                shutil.rmtree(f, ignore_errors=True)
                self.add(("formats", "zarr", codec, "zarrs", "write"), seconds(sh([zarrs, "write", f, str(n), str(shard), str(chunk), codec])))
                self.add(("formats", "zarr", codec, "zarrs", "read"), seconds(sh([zarrs, "read", f, str(n), str(shard), str(chunk), codec])))
            w, r = spools_io("hdf5", self.f("h5-spools.h5"))
            self.add(("formats", "hdf5", "spools", "write"), w)
            self.add(("formats", "hdf5", "spools", "read"), r)
            w, r = spools_io("canonical", self.f("h5-canonical.bin"))
            self.add(("formats", "hdf5", "canonical", "write"), w)
            self.add(("formats", "hdf5", "canonical", "read"), r)
            f = self.f("h5-h5py.h5")
            self.add(("formats", "hdf5", "h5py", "write"), seconds(sh([py, peer_py, "h5py", "write", f, str(n)])))
            self.add(("formats", "hdf5", "h5py", "read"), seconds(sh([py, peer_py, "h5py", "read", f, str(n)])))
            if os.path.exists(phdf5):
                f = self.f("h5-phdf5.h5")
                if os.path.exists(f):
                    os.remove(f)
                r = last_json(sh(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "4", phdf5, "--n", str(n), "--file", f, "--reps", "1", "--read"]).stdout)
                self.add(("formats", "hdf5", "parallel-hdf5", "write"), r["write_s"][0])
                self.add(("formats", "hdf5", "parallel-hdf5", "read"), r["read_s"][0])

    # --- output ------------------------------------------------------------------------
    def save(self):
        with open(os.path.join(self.out, "results.json"), "w") as fh:
            json.dump([{"key": list(map(str, k)), "samples": v} for k, v in self.samples.items()], fh, indent=1)


def build_formats(out):
    """The peers of `formats`: the zarrs example, zarr-python and h5py in target/bench-venv,
    and the parallel-HDF5 program against Debian's libhdf5-openmpi-dev (installed when
    missing; Spools itself loads the serial libhdf5, libhdf5_serial.so.103, at run time).
    Without that package the parallel-HDF5 column is left out."""
    sh(["bash", os.path.join(ROOT, "scripts", "install-hdf5.sh")], timeout=1800)
    sh(["cargo", "build", "--release", "--locked", "-p", "spools-io", "--example", "zarrs_peer"], timeout=1800)
    venv = os.path.join(ROOT, "target", "bench-venv")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        sh([sys.executable, "-m", "venv", venv])
    sh([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "numpy>=1.24", "zarr>=3,<4", "h5py>=3"], timeout=1800)
    inc, lib = "/usr/include/hdf5/openmpi", "/usr/lib/x86_64-linux-gnu/hdf5/openmpi"
    if not os.path.exists(os.path.join(inc, "hdf5.h")):
        root = [] if os.geteuid() == 0 else ["sudo", "-n"]
        p = subprocess.run(root + ["apt-get", "install", "-y", "-q", "libhdf5-openmpi-dev"], capture_output=True, text=True)
        serial = "/usr/lib/x86_64-linux-gnu/pkgconfig/hdf5-serial.pc"
        if os.path.exists(serial):
            subprocess.run(root + ["update-alternatives", "--set", "hdf5.pc", serial], capture_output=True)
        if p.returncode != 0:
            print("formats: libhdf5-openmpi-dev could not be installed; no parallel-HDF5 column", file=sys.stderr)
    if os.path.exists(os.path.join(inc, "hdf5.h")):
        sh(["mpicc", "-O2", "-Wall", "-Wextra", f"-I{inc}", "-o", os.path.join(out, "phdf5"), os.path.join(ROOT, "bench", "peers", "phdf5.c"), f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhdf5"])


def build(out, only):
    if "formats" in only:
        sh(["bash", os.path.join(ROOT, "scripts", "install-hdf5.sh")], timeout=1800)
    sh(["cargo", "build", "--release", "--locked", "-p", "spools-cli"], timeout=1800)
    if shutil.which("mpicc") is None or shutil.which("mpirun") is None:
        sh(["sudo", "-n", "apt-get", "install", "-y", "openmpi-bin", "libopenmpi-dev"] if os.geteuid() else ["apt-get", "install", "-y", "openmpi-bin", "libopenmpi-dev"], timeout=1800)
    peers = os.path.join(ROOT, "bench", "peers")
    sh(["mpicc", "-O2", "-Wall", "-Wextra", "-o", os.path.join(out, "io_peer"), os.path.join(peers, "io.c")])
    if "formats" in only:
        build_formats(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench-io"))
    ap.add_argument("--quick", action="store_true", help="smaller sizes (to try the script)")
    ap.add_argument("--only", default="redist,collperf,readn,raid,units,fig15,pipes,formats,rss")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    build(a.out, a.only.split(","))
    b = Bench(a.out, a.runs, a.quick)
    with open(os.path.join(a.out, "host.txt"), "w") as fh:
        fh.write(subprocess.run(["sh", "-c", "uname -a; nproc; free -g | head -2; df -h " + a.out + " | tail -1; mpirun --version | head -1; git -C " + ROOT + " rev-parse --short HEAD"], capture_output=True, text=True).stdout)
    for name in a.only.split(","):
        t = time.time()
        getattr(b, name)()
        b.save()
        print(f"{name}: {time.time() - t:.0f} s", file=sys.stderr)
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "summarize.py"), a.out], check=True)


if __name__ == "__main__":
    main()
