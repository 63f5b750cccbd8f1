#!/usr/bin/env python3
"""The scale kit's figures as a table: medians of every run of each line.

Usage: python3 bench/scale/summarize.py scale.txt [rounds.txt ...]

Reads run.sh's `coll P OP BYTES spools X mpich Y ompi Z [spools_bound W]` lines and
rounds.sh's `round N coll P OP BYTES ompi Z spools X mpich Y` lines and nonblocking.sh's
`nb N P OP BYTES old A new X ompi Z mpich Y` lines (`new` is Spools; `old`, another build of
it, is printed after the cell as `old A`), takes the median of every figure each MPI has for a
(P, OP, BYTES), and prints one Markdown row per collective: Spools / MPICH / Open MPI (µs)
and, in brackets, Spools over the better of the two peers (bold where Spools is ahead or
level), with the number of runs. A FAIL is left out of the median and counted.
"""
import statistics
import sys
from collections import defaultdict


def parse(paths):
    runs = defaultdict(lambda: defaultdict(list))
    fails = defaultdict(int)
    for path in paths:
        for line in open(path):
            f = line.split()
            if f[:1] == ["round"]:
                f = f[2:]
            elif f[:1] == ["nb"]:
                f = ["coll"] + [("spools" if x == "new" else x) for x in f[2:]]
            if len(f) < 6 or f[0] != "coll":
                continue
            key = (int(f[1]), f[2], int(f[3]))
            for impl, val in zip(f[4::2], f[5::2]):
                try:
                    runs[key][impl].append(float(val))
                except ValueError:
                    fails[(key, impl)] += 1
    return runs, fails


def fmt(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def main():
    runs, fails = parse(sys.argv[1:])
    ps = sorted({p for p, _, _ in runs})
    tests = []
    for _, op, size in runs:
        if (op, size) not in tests:
            tests.append((op, size))
    print("| test (µs) | " + " | ".join(f"{p} ranks" for p in ps) + " |")
    print("|---|" + "---|" * len(ps))
    for op, size in tests:
        if not any(runs.get((p, op, size), {}).get("spools") for p in ps):
            continue
        cells = []
        for p in ps:
            r = runs.get((p, op, size))
            if not r or not r.get("spools"):
                cells.append("–")
                continue
            med = {k: statistics.median(v) for k, v in r.items() if v}
            peers = [med[k] for k in ("mpich", "ompi") if k in med]
            ratio = med["spools"] / min(peers) if peers else float("nan")
            cell = " / ".join(fmt(med[k]) if k in med else "–" for k in ("spools", "mpich", "ompi"))
            tag = f"**{ratio:.2f}**" if ratio <= 1.0 else f"{ratio:.2f}"
            n = len(r["spools"])
            bad = sum(fails[((p, op, size), k)] for k in ("spools", "mpich", "ompi"))
            old = f" old {fmt(med['old'])}" if "old" in med else ""
            cells.append(f"{cell} ({tag}){old}{'' if n == 1 else f' n={n}'}{f' {bad} failed' if bad else ''}")
        label = op if op == "barrier" else f"{op} {size if size < 1024 else (f'{size // 1024} KiB' if size < 1 << 20 else f'{size >> 20} MiB')}"
        if size < 1024 and op != "barrier":
            label += " B"
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
