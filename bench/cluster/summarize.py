#!/usr/bin/env python3
"""Summarise bench/cluster/run.sh: medians over the runs, as Markdown tables.

Usage: summarize.py DIR RUNS CONDITIONS
"""
import json
import statistics
import sys
from pathlib import Path


def load(d, name, runs):
    docs = []
    for r in range(1, runs + 1):
        p = d / f"{name}.run{r}.json"
        try:
            text = p.read_text().strip()
            try:
                docs.append(json.loads(text))
            except ValueError:  # a program's one-line document after other output
                docs.append(json.loads(text.splitlines()[-1]))
        except (OSError, ValueError, IndexError):
            print(f"warning: {p} is missing or not JSON (see {d}/logs)", file=sys.stderr)
    return docs


def points(doc, op=None):
    """{bytes: latency_us} of a pingpong/coll/netpp document (coll: of series `op`)."""
    if "points" in doc:
        pts = doc["points"]
    else:
        series = [s for s in doc["series"] if op is None or s.get("op") == op]
        pts = series[0]["points"] if series else []
    return {p["bytes"]: p["latency_us"] for p in pts}


def median_points(docs, op=None):
    by = {}
    for d in docs:
        for b, v in points(d, op).items():
            by.setdefault(b, []).append(v)
    return {b: statistics.median(v) for b, v in by.items()}


def size(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def main():
    d, runs, cond = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    print(f"# Between two hosts (network namespaces over veth), {runs} run(s), {cond}\n")
    iperf = [
        j["end"]["sum_received"]["bits_per_second"] / 8e6
        for j in load(d, "iperf3", runs)
    ]
    net = median_points(load(d, "netpp", runs))
    sp = median_points(load(d, "pingpong-spools", runs))
    mp = median_points(load(d, "pingpong-mpi", runs))
    print("## Point to point, one rank per host (medians)\n")
    print("| size | raw TCP ping-pong | Spools tagged | Open MPI | Spools / raw | Open MPI / Spools |")
    print("|---|---|---|---|---|---|")
    for b in sorted(set(net) | set(sp) | set(mp)):
        def show(v):
            if v is None:
                return "-"
            return f"{v:.1f} us" if b < 65536 else f"{b / v:.0f} MB/s"
        ratio = lambda a, c: f"{a / c:.2f}" if a and c else "-"
        n, s, m = net.get(b), sp.get(b), mp.get(b)
        print(f"| {size(b)} | {show(n)} | {show(s)} | {show(m)} | {ratio(s, n)} (time) | {ratio(m, s)} (time) |")
    if iperf:
        best = max(sp.get(1 << 20) and (1 << 20) / sp[1 << 20] or 0, 0)
        print(f"\niperf3, one stream h1 -> h2: {statistics.median(iperf):.0f} MB/s (median);"
              f" Spools 1 MiB ping-pong bandwidth: {best:.0f} MB/s"
              f" ({best / statistics.median(iperf):.2f}x iperf3)\n")
    sc, mc = load(d, "coll-spools", runs), load(d, "coll-mpi", runs)
    print("## Collectives, 2 hosts x 2 ranks (latency, medians)\n")
    print("| op | size | Spools | Open MPI | Open MPI / Spools |")
    print("|---|---|---|---|---|")
    for op in ("allreduce", "bcast"):
        s, m = median_points(sc, op), median_points(mc, op)
        for b in sorted(set(s) | set(m)):
            sv, mv = s.get(b), m.get(b)
            r = f"{mv / sv:.2f}" if sv and mv else "-"
            fmt = lambda v: f"{v:.1f} us" if v is not None else "-"
            print(f"| {op} | {size(b)} | {fmt(sv)} | {fmt(mv)} | {r} |")


if __name__ == "__main__":
    main()
