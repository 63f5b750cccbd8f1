#!/usr/bin/env python3
"""Summarize the osu suite written by bench/peers/osu.sh.

Usage: osu_summary.py [DIR]   (default: target/bench-peers/osu)

Reads every table DIR/NAME-IMPL.runI.txt (IMPL is spools, openmpi or mpich; NAME is a test,
with -PN for the collectives on N ranks), each in the OSU micro-benchmarks' format, takes the
median per size over the runs, and prints one Markdown table per NAME:
size | Spools | Open MPI | MPICH | Spools/Open MPI. For latencies the ratio is Spools' time
over Open MPI's (below 1: Spools is faster); for bandwidths Spools' bandwidth over Open
MPI's (above 1: Spools is faster). What is missing is shown as "n/a".
Python standard library only.
"""

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

RUN_FILE = re.compile(r"^(?P<name>.+)-(?P<impl>spools|openmpi|mpich)\.run(?P<run>\d+)\.txt$")
IMPLS = ("spools", "openmpi", "mpich")
ORDER = ("latency", "bw", "bibw", "allreduce", "bcast", "barrier", "alltoall")


def parse(text):
    """The (size, value) rows and the title of an OSU table; barrier's row has size 0."""
    title, unit, rows = "", "", []
    for line in text.splitlines():
        if line.startswith("# OSU"):
            title = re.sub(r"\s*\([^)]*\)\s*$", "", line[2:])
        elif line.startswith("#"):
            unit = "MB/s" if "MB/s" in line else "us"
        elif line.strip():
            parts = line.split()
            try:
                if len(parts) == 1:
                    rows.append((0, float(parts[0])))
                elif len(parts) == 2:
                    rows.append((int(parts[0]), float(parts[1])))
            except ValueError:
                continue
    return title, unit, rows


def fmt(v):
    return "n/a" if v is None else f"{v:.2f}"


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "target/bench-peers/osu")
    values = defaultdict(lambda: defaultdict(list))  # name -> (impl, size) -> [values]
    titles, units = {}, {}
    for f in sorted(out.glob("*.run*.txt")):
        m = RUN_FILE.match(f.name)
        if not m:
            continue
        title, unit, rows = parse(f.read_text(encoding="utf-8", errors="replace"))
        name = m["name"]
        if title:
            titles[name] = title
        if unit:
            units[name] = unit
        for size, v in rows:
            values[name][(m["impl"], size)].append(v)
    if not values:
        print(f"no tables in {out} (run bench/peers/osu.sh first)")
        return 1
    host = out / "host.txt"
    if host.exists():
        print("```")
        print(host.read_text(encoding="utf-8").rstrip())
        print("```")
        print()

    def key(name):
        base = name.split("-P")[0]
        return (ORDER.index(base) if base in ORDER else len(ORDER), name)

    for name in sorted(values, key=key):
        unit = units.get(name, "us")
        by = values[name]
        sizes = sorted({s for (_, s) in by})
        med = {k: statistics.median(v) for k, v in by.items()}
        ratio_label = "Spools/Open MPI" + (" (bandwidth)" if unit == "MB/s" else " (time)")
        print(f"### {name}: {titles.get(name, name)} ({unit}, median of runs)")
        print()
        print(f"| size | Spools | Open MPI | MPICH | {ratio_label} |")
        print("|---:|---:|---:|---:|---:|")
        for s in sizes:
            sp, om, mp = (med.get((i, s)) for i in IMPLS)
            ratio = f"{sp / om:.2f}" if sp is not None and om else "n/a"
            print(f"| {s} | {fmt(sp)} | {fmt(om)} | {fmt(mp)} | {ratio} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
