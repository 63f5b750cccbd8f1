#!/usr/bin/env python3
"""Summarize the one-sided (RMA) suite written by bench/peers/rma.sh.

Usage: rma_summary.py [DIR]   (default: target/bench-peers/rma)

Reads every table DIR/TEST-IMPL.runI.txt (TEST is put_latency, get_latency, acc_latency,
put_bw or get_bw; IMPL is spools, mpich-abi or openmpi), each in the OSU micro-benchmarks'
format as bench/peers/rma.c prints it, takes the median per size over the runs, and prints
one Markdown table per test: size | Spools | MPICH ABI | Open MPI | Spools/MPICH ABI |
Spools/Open MPI. The ratios are of the medians: times over times for the latencies (lower
is better: below 1, Spools is faster), bandwidths over bandwidths for the bandwidths (higher
is better: above 1, Spools is faster). What is missing is shown as "n/a". DIR/host.txt, if
there, is printed first. Python standard library only.
"""

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

RUN_FILE = re.compile(r"^(?P<test>[a-z_]+)-(?P<impl>spools|mpich-abi|openmpi)\.run(?P<run>\d+)\.txt$")
IMPLS = (("spools", "Spools"), ("mpich-abi", "MPICH ABI"), ("openmpi", "Open MPI"))
ORDER = ("put_latency", "get_latency", "acc_latency", "put_bw", "get_bw")


def parse(text):
    """The title, window creation, unit and (size, value) rows of one table."""
    title, window, unit, rows = "", "", "", []
    for line in text.splitlines():
        if line.startswith("# OSU"):
            title = re.sub(r"\s*\([^)]*\)\s*$", "", line[2:])
        elif line.startswith("# Window creation:"):
            window = line.split(":", 1)[1].strip()
        elif line.startswith("# Size"):
            unit = "MB/s" if "MB/s" in line else "us"
        elif line.strip() and not line.startswith("#"):
            parts = line.split()
            if len(parts) == 2:
                try:
                    rows.append((int(parts[0]), float(parts[1])))
                except ValueError:
                    continue
    return title, window, unit, rows


def fmt(v):
    return "n/a" if v is None else f"{v:.2f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def size_label(s):
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return f"{s >> 20} MiB"
    if s >= 1 << 10 and s % (1 << 10) == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "target/bench-peers/rma")
    values = defaultdict(lambda: defaultdict(dict))  # test -> (impl, size) -> {run: value}
    titles, windows, units = {}, {}, {}
    for f in sorted(out.glob("*.run*.txt")):
        m = RUN_FILE.match(f.name)
        if not m:
            continue
        title, window, unit, rows = parse(f.read_text(encoding="utf-8", errors="replace"))
        test = m["test"]
        titles[test] = title or titles.get(test, test)
        windows[test] = window or windows.get(test, "")
        units[test] = unit or units.get(test, "us")
        for size, v in rows:
            values[test][(m["impl"], size)][int(m["run"])] = v
    if not values:
        print(f"no tables in {out} (run bench/peers/rma.sh first)")
        return 1
    host = out / "host.txt"
    if host.exists():
        print("```")
        print(host.read_text(encoding="utf-8").rstrip())
        print("```")
        print()

    def key(test):
        return (ORDER.index(test) if test in ORDER else len(ORDER), test)

    for test in sorted(values, key=key):
        by = values[test]
        unit = units.get(test, "us")
        bandwidth = unit == "MB/s"
        med = {k: statistics.median(v.values()) for k, v in by.items()}
        nruns = max(len(v) for v in by.values())
        sizes = sorted({s for (_, s) in by})
        better = (
            "higher is better; ratio above 1: Spools is faster"
            if bandwidth
            else "lower is better; ratio below 1: Spools is faster"
        )
        window = f", {windows[test]}" if windows.get(test) else ""
        print(
            f"### {test}: {titles.get(test, test)} "
            f"({unit}, median of {nruns} runs{window}, MPI_Win_flush; {better})"
        )
        print()
        print("| size | Spools | MPICH ABI | Open MPI | Spools/MPICH ABI | Spools/Open MPI |")
        print("|---:|---:|---:|---:|---:|---:|")
        for s in sizes:
            sp, mp, om = (med.get((i, s)) for i, _ in IMPLS)
            print(
                f"| {size_label(s)} | {fmt(sp)} | {fmt(mp)} | {fmt(om)} | "
                f"{ratio(sp, mp)} | {ratio(sp, om)} |"
            )
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
