#!/usr/bin/env python3
"""Summarise bench/cluster/ofi.sh: medians over the runs, as Markdown tables, with the
issue's goals (1 MiB bandwidth over libfabric >= 0.9x Spools' TCP; 8 B latency within
1.5x of fi_pingpong on the same provider).

Usage: summarize-ofi.py DIR RUNS CONDITIONS
"""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from summarize import load, median_points, size  # noqa: E402


def fi_pingpong(d, runs):
    """{bytes: one-way latency in us} medians of fi_pingpong's tables (usec/xfer: the
    time of one transfer, half a round trip)."""
    by = {}
    for r in range(1, runs + 1):
        p = d / f"fi_pingpong.run{r}.txt"
        try:
            lines = p.read_text().splitlines()
        except OSError:
            print(f"warning: {p} is missing", file=sys.stderr)
            continue
        for line in lines:
            f = line.split()
            if len(f) < 8 or f[0] == "bytes":
                continue
            # fi_pingpong prints sizes as 8, 4k, 1m (powers of 1024).
            scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(f[0][-1:], 1)
            try:
                b = int(f[0][:-1] if scale > 1 else f[0]) * scale
                by.setdefault(b, []).append(float(f[6]))
            except ValueError:
                pass
    return {b: statistics.median(v) for b, v in by.items()}


def series(docs, path):
    """Documents reduced to the series named `path` (pingpong --api am has several)."""
    out = []
    for doc in docs:
        s = [x for x in doc.get("series", []) if x.get("path") == path]
        if s:
            out.append({"points": s[0]["points"]})
    return out


def main():
    d, runs, cond = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    print(f"# libfabric between two hosts (network namespaces over veth), {runs} run(s), {cond}\n")
    MiB = 1 << 20
    rows = [
        ("raw TCP ping-pong (netpp.c)", median_points(load(d, "netpp", runs))),
        ("fi_pingpong tcp;ofi_rxm", fi_pingpong(d, runs)),
        ("Spools tagged, TCP", median_points(load(d, "tagged-tcp", runs))),
        ("Spools tagged, ofi tcp;ofi_rxm", median_points(load(d, "tagged-ofi", runs))),
        ("Spools memory (put), TCP", median_points(series(load(d, "am-tcp", runs), "memory"))),
        ("Spools memory (put), ofi (one-sided)",
         median_points(series(load(d, "am-ofi", runs), "memory"))),
        ("Open MPI, ofi MTL tcp;ofi_rxm", median_points(load(d, "mpi-ofi", runs))),
        ("Open MPI, TCP BTL", median_points(load(d, "mpi-tcp", runs))),
    ]
    if any(r[1] for r in rows):
        print("## Point to point, one rank per host (medians)\n")
        print("| program | 8 B one-way | 1 MiB |")
        print("|---|---|---|")
        for name, pts in rows:
            lat = f"{pts[8]:.1f} us" if 8 in pts else "-"
            bw = f"{MiB / pts[MiB]:.0f} MB/s" if pts.get(MiB) else "-"
            print(f"| {name} | {lat} | {bw} |")
        named = dict(rows)
        tcp, ofi = named["Spools tagged, TCP"], named["Spools tagged, ofi tcp;ofi_rxm"]
        fip = named["fi_pingpong tcp;ofi_rxm"]
        print()
        if tcp.get(MiB) and ofi.get(MiB):
            r = tcp[MiB] / ofi[MiB]
            print(f"- 1 MiB bandwidth over ofi / over Spools' TCP: {r:.2f}x "
                  f"(goal >= 0.9x: {'met' if r >= 0.9 else 'missed'})")
        if fip.get(MiB) and ofi.get(MiB):
            r = fip[MiB] / ofi[MiB]
            print(f"- 1 MiB bandwidth over ofi / fi_pingpong's: {r:.2f}x")
        if fip.get(8) and ofi.get(8):
            r = ofi[8] / fip[8]
            print(f"- 8 B latency over ofi / fi_pingpong: {r:.2f}x "
                  f"(goal <= 1.5x: {'met' if r <= 1.5 else 'missed'})")
        print()
    print("## Collectives, 2 hosts x 2 ranks (latency, medians; values checked)\n")
    print("| op | size | Spools over TCP | Spools over ofi | ofi / TCP |")
    print("|---|---|---|---|---|")
    ct, co = load(d, "coll-tcp", runs), load(d, "coll-ofi", runs)
    for op in ("allreduce", "bcast"):
        t, o = median_points(ct, op), median_points(co, op)
        for b in sorted(set(t) | set(o)):
            tv, ov = t.get(b), o.get(b)
            r = f"{ov / tv:.2f}" if tv and ov else "-"
            fmt = lambda v: f"{v:.1f} us" if v is not None else "-"
            print(f"| {op} | {size(b)} | {fmt(tv)} | {fmt(ov)} | {r} |")


if __name__ == "__main__":
    main()
