#!/usr/bin/env python3
"""Summarises bench/redist/run.py's results.json into DIR/summary.md and DIR/redist.svg.

usage: bench/redist/summarize.py DIR

Medians over the rounds of each program's own median, and the median over the rounds of
Spools' ratio to pdgemr2d within each round (the two ran one after the other, so drift of a
shared machine hits both alike). memcpy is the median over every
document of the case (each program times one rank's memcpy of the dataset between its
repetitions). Goals of issue 18: ordinary buffers >= 2x pdgemr2d in every case; shared-heap
buffers >= 0.5x memcpy for runs >= 4 KiB and >= 0.2x for 8 B runs (no goal in between).
"""

import json
import math
import os
import statistics
import sys

SYSTEMS = [("spools", "Spools"), ("spools-heap", "Spools, shared heap"), ("spools-ring", "Spools, single copy off"),
           ("scalapack", "ScaLAPACK pdgemr2d")]
COLORS = {"spools": "#1f77b4", "spools-heap": "#2ca02c", "spools-ring": "#9467bd", "scalapack": "#d62728", "memcpy": "#7f7f7f"}
# The rows of the table: Spools' systems and how their buffers are named.
ROWS = [("spools", "ordinary"), ("spools-heap", "shared heap"), ("spools-ring", "ordinary, single copy off")]


def med(values):
    return statistics.median(values) if values else float("nan")


def fmt(x, digits=2):
    return "-" if x != x else f"{x:.{digits}f}"


def goal(system, mean_run, gb_s, peer_gb_s, memcpy_gb_s):
    """(goal text, PASS/MISS/-) of one row."""
    if system == "spools":
        return ">= 2x pdgemr2d", verdict(gb_s / peer_gb_s, 2.0)
    if system != "spools-heap":
        return "(none)", "-"
    if mean_run >= 4096:
        return ">= 0.5x memcpy", verdict(gb_s / memcpy_gb_s, 0.5)
    if mean_run <= 8:
        return ">= 0.2x memcpy", verdict(gb_s / memcpy_gb_s, 0.2)
    return "(none at this run length)", "-"


def verdict(ratio, want):
    if ratio != ratio:
        return "-"
    return "PASS" if ratio >= want else "MISS"


def svg_bars(path, groups, systems):
    """Grouped bars of GB/s on a log scale (8 B runs and memcpy are 2-3 decades apart):
    groups is [(label, {system: value})]."""
    legend = 170
    w, h, left, bottom, top = max(640, 90 * len(groups) + 120) + legend, 420, 60, 70, 40
    vals = [v for _, g in groups for v in g.values() if v == v and v > 0]
    if not vals:
        return
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    hi = max(hi, lo + 1)
    gw = (w - legend - left - 20) / len(groups)
    bw = gw * 0.8 / len(systems)
    py = lambda y: h - bottom - (math.log10(y) - lo) / (hi - lo) * (h - bottom - top)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14">Redistribution of f64[2048,2048] (GB/s, log scale, higher is better)</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - legend - 20}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">GB/s</text>']
    for e in range(lo, hi + 1):
        y = 10.0 ** e
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{w - legend - 20}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for i, (label, g) in enumerate(groups):
        x0 = left + i * gw + gw * 0.1
        for j, (key, _) in enumerate(systems):
            v = g.get(key, float("nan"))
            if v == v and v > 0:
                out.append(f'<rect x="{x0 + j * bw:.1f}" y="{py(v):.1f}" width="{bw:.1f}" height="{h - bottom - py(v):.1f}" fill="{COLORS[key]}"/>')
        for n, part in enumerate(label.split("\n")):
            out.append(f'<text x="{x0 + gw * 0.4:.1f}" y="{h - bottom + 16 + 14 * n}" text-anchor="middle">{part}</text>')
    for j, (key, name) in enumerate(systems):
        out.append(f'<rect x="{w - legend}" y="{top + 16 * j}" width="10" height="10" fill="{COLORS[key]}"/>')
        out.append(f'<text x="{w - legend + 16}" y="{top + 9 + 16 * j}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/redist/summarize.py DIR")
    d = sys.argv[1]
    with open(os.path.join(d, "results.json")) as fh:
        samples = json.load(fh)
    by = {}
    for s in samples:
        by.setdefault((s["case"], s["ranks"]), {}).setdefault(s["system"], []).append(s["doc"])
    rounds = max((len(docs) for g in by.values() for docs in g.values()), default=0)
    loads = [x["load"] for x in samples if "load" in x]
    L = ["# Redistribution in memory: Spools, ScaLAPACK pdgemr2d, memcpy", "",
         f"Medians of {rounds} alternating rounds (each program's own median of its repetitions); "
         "column-major f64[2048,2048] (32 MiB). memcpy: one rank copying the same bytes, timed "
         "between the repetitions of every program of the case."
         + (f" 1-minute load average before the jobs: median {med(loads):.1f}, {min(loads):.1f} to {max(loads):.1f}." if loads else ""), "",
         "Spools/pdgemr2d is the ratio of the medians; per round, the median of the ratios within each round.", "",
         "| case | ranks | mean run | buffers | Spools GB/s | pdgemr2d GB/s | memcpy GB/s | Spools/pdgemr2d | per round | Spools/memcpy | goal | |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes, groups = [], []
    present = [(k, n) for k, n in SYSTEMS if any(k in g for g in by.values())]
    order = ["row-col", "block-cyc64", "block-cyc1"]
    rank = lambda case: order.index(case) if case in order else len(order)
    for (case, p), g in sorted(by.items(), key=lambda e: (rank(e[0][0]), e[0][0], e[0][1])):
        gb = {k: med([doc["redistribute_gb_s"] for doc in docs]) for k, docs in g.items()}
        memcpy = med([doc["memcpy_gb_s"] for docs in g.values() for doc in docs])
        runs = {k: {doc["runs"] for doc in docs} for k, docs in g.items()}
        if len({r for rs in runs.values() for r in rs}) > 1:
            notes.append(f"- {case}, {p} ranks: the programs count different runs ({runs}): the distributions differ")
        mean_run = med([doc["mean_run_bytes"] for docs in g.values() for doc in docs])
        peer = gb.get("scalapack", float("nan"))
        for key, name in ROWS:
            if key not in gb:
                continue
            text, mark = goal(key, mean_run, gb[key], peer, memcpy)
            pairs = zip(g[key], g.get("scalapack", []))
            per_round = med([x["redistribute_gb_s"] / y["redistribute_gb_s"] for x, y in pairs])
            L.append(f"| {case} | {p} | {mean_run:.0f} B | {name} | {fmt(gb[key])} | {fmt(peer)} | {fmt(memcpy)} | "
                     f"{fmt(gb[key] / peer)} | {fmt(per_round)} | {fmt(gb[key] / memcpy, 3)} | {text} | {mark} |")
        groups.append((f"{case}\n{p} ranks", dict(gb, memcpy=memcpy)))
    if notes:
        L += ["", "Mismatches:"] + notes
    if not any("spools-heap" in g for g in by.values()):
        L += ["", "No shared-heap rows: this spools bench redist has no --heap."]
    svg_bars(os.path.join(d, "redist.svg"), groups, present + [("memcpy", "memcpy (one rank)")])
    L += ["", "Plot: redist.svg."]
    with open(os.path.join(d, "summary.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
