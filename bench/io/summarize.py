#!/usr/bin/env python3
"""Summarises bench/io/run.py's results.json into summary.md and SVG plots.

usage: bench/io/summarize.py DIR
"""

import json
import os
import statistics
import sys


def load(d):
    with open(os.path.join(d, "results.json")) as fh:
        return {tuple(e["key"]): e["samples"] for e in json.load(fh)}


def med(v):
    return statistics.median(v) if v else float("nan")


def svg_lines(path, title, xlabel, ylabel, xs, series):
    """A small log-x line plot: series is [(name, [y...])]."""
    import math
    w, h, l, b = 640, 400, 70, 50
    ys = [y for _, s in series for y in s if y == y]
    if not ys:
        return
    ymax = max(ys) * 1.1
    lx = [math.log2(x) for x in xs]
    x0, x1 = min(lx), max(lx) if max(lx) > min(lx) else min(lx) + 1
    px = lambda x: l + (math.log2(x) - x0) / (x1 - x0) * (w - l - 20)
    py = lambda y: h - b - y / ymax * (h - b - 30)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w/2}" y="18" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{l}" y1="{h-b}" x2="{w-20}" y2="{h-b}" stroke="black"/><line x1="{l}" y1="30" x2="{l}" y2="{h-b}" stroke="black"/>',
           f'<text x="{w/2}" y="{h-10}" text-anchor="middle">{xlabel}</text>',
           f'<text x="15" y="{h/2}" transform="rotate(-90 15 {h/2})" text-anchor="middle">{ylabel}</text>']
    for x in xs:
        out.append(f'<text x="{px(x)}" y="{h-b+16}" text-anchor="middle">{x}</text>')
    for k in range(5):
        y = ymax * k / 4
        out.append(f'<text x="{l-6}" y="{py(y)+4}" text-anchor="end">{y:.0f}</text>')
    for i, (name, s) in enumerate(series):
        c = colors[i % len(colors)]
        pts = " ".join(f"{px(x)},{py(y)}" for x, y in zip(xs, s) if y == y)
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{pts}"/>')
        out.append(f'<text x="{w-200}" y="{40+16*i}" fill="{c}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out))


def main():
    d = sys.argv[1]
    s = load(d)
    m = lambda *k: med(s.get(tuple(map(str, k)), []))
    L = ["# Parallel-I/O benchmarks", "", "Medians of the runs in results.json (every sample is there). "
         "Files are overwritten in place unless marked fresh.", ""]

    if any(k[0] == "redist" for k in s):
        L += ["## Redistribution in memory (4 ranks) vs single-thread memcpy, same run", "",
              "| case | mean run | Spools GB/s | memcpy GB/s | ratio |", "|---|---|---|---|---|"]
        for k in sorted({k[1] for k in s if k[0] == "redist"}):
            L.append(f"| {k} | {m('redist', k, 'mean_run'):.0f} B | {m('redist', k, 'gb_s'):.2f} | {m('redist', k, 'memcpy_gb_s'):.2f} | {m('redist', k, 'ratio'):.2f} |")
        L.append("")

    if any(k[0] == "collperf" for k in s):
        L += ["## coll_perf (SCI-MPICH Table 3): 3-D BLOCK i32, canonical file, overwritten", "",
              "Seconds: the median over the rounds of each program's median of 3 writes (and reads) in one job, Spools and MPI-IO alike; dd runs once a round. Ratios: Spools' time against raw dd of the same bytes (raw/Spools) and against the better of OMPIO and ROMIO (MPI/Spools); above 1 means Spools is faster. \"Spools\" is the default write (atomic: a temporary file renamed over the old one); \"in place\" is `--in-place` (`Commit::InPlace`), which overwrites the file where it is as MPI-IO and dd do.", "",
              "| n | ranks | mode | Spools write | in place write | OMPIO write | ROMIO write | raw dd write | raw/Spools | raw/in place | best MPI/Spools | best MPI/in place | Spools read | in place read | OMPIO read | ROMIO read |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for n in sorted({int(k[1]) for k in s if k[0] == "collperf" and k[1].isdigit() and len(k) == 6}):
            for p in (2, 4):
                for mode in ("buffered", "durable"):
                    sw, iw, ow, rw, dw = (m("collperf", n, p, mode, x, "write") for x in ("spools", "spools-inplace", "ompio", "romio321", "raw"))
                    sr, ir, orr, rr = (m("collperf", n, p, mode, x, "read") for x in ("spools", "spools-inplace", "ompio", "romio321"))
                    L.append(f"| {n} | {p} | {mode} | {sw:.4f} | {iw:.4f} | {ow:.4f} | {rw:.4f} | {dw:.4f} | {dw/sw:.2f} | {dw/iw:.2f} | {min(ow, rw)/sw:.2f} | {min(ow, rw)/iw:.2f} | {sr:.4f} | {ir:.4f} | {orr:.4f} | {rr:.4f} |")
        for k in sorted(k for k in s if k[0] == "collperf" and k[-1] == "identical"):
            L.append(f"\nFiles of n={k[1]} byte-identical to both MPI-IO components' (and Spools' in-place file) in every run: {all(s[k])}.")
        f1, f2 = m("collperf", "fresh", 128, 4, "spools"), m("collperf", "fresh", 128, 4, "ompio")
        if f1 == f1:
            L.append(f"\nFresh files (n=128, 4 ranks, buffered write into a file that did not exist): Spools {f1:.4f} s, OMPIO {f2:.4f} s; overwriting: Spools {m('collperf', 128, 4, 'buffered', 'spools', 'write'):.4f} s.")
        L.append("")

    if any(k[0] == "readn" for k in s):
        L += ["## Read with another number of ranks (written by 4 ranks as 2x2x1 blocks)", "", "| ranks | layout | seconds | vs same-count read |", "|---|---|---|---|"]
        keys = sorted({(k[1], k[2]) for k in s if k[0] == "readn"})
        same = [m("readn", r, l) for r, l in keys if r == "4"]
        base = same[0] if same else float("nan")
        for r, l in keys:
            t = m("readn", r, l)
            L.append(f"| {r} | {l} | {t:.4f} | {base/t:.2f} |")
        L.append("")

    if any(k[0] == "raid" for k in s):
        w0, w5 = m("raid", "stripe(unit=1MiB,count=4)", "write"), m("raid", "raid5(unit=1MiB,count=4)", "write")
        r5, rd = m("raid", "raid5(unit=1MiB,count=4)", "read"), m("raid", "degraded", "read")
        r0 = m("raid", "stripe(unit=1MiB,count=4)", "read")
        L += ["## RAID-5 (4 ranks, 4 units of 1 MiB, durable writes)", "",
              "| | seconds |", "|---|---|",
              f"| RAID-0 write | {w0:.4f} |", f"| RAID-5 write | {w5:.4f} (+{(w5/w0-1)*100:.0f} %) |",
              f"| RAID-0 read | {r0:.4f} |", f"| RAID-5 read, healthy | {r5:.4f} |", f"| RAID-5 read, one unit deleted | {rd:.4f} ({r5/rd:.2f} x healthy speed) |", ""]
        L += ["RAID-5 over K units writes K/(K-1) times the data's bytes (parity), so on one disk its write costs at least that much more than RAID-0's; \"beyond the bytes\" is what is left of the overhead after that factor (the parity computation, folded into the copy).", "",
              "| units | RAID-0 write | RAID-5 write | overhead | parity bytes | beyond the bytes |", "|---|---|---|---|---|---|"]
        for k in (4, 8):
            a, b = m("raid", f"stripe(unit=1MiB,count={k})", "write"), m("raid", f"raid5(unit=1MiB,count={k})", "write")
            if a == a and b == b:
                L.append(f"| {k} | {a:.4f} | {b:.4f} | +{(b/a-1)*100:.0f} % | +{100/(k-1):.0f} % | {(b/a/(k/(k-1))-1)*100:+.0f} % |")
        L.append("")

    if any(k[0] == "units" for k in s):
        L += ["## Striped over K unit files (nCUBE Table 3; all units on this machine's one disk)", "", "| units | write MB/s | read MB/s |", "|---|---|---|"]
        for k in (1, 2, 4):
            wt, rt = m("units", k, "write"), m("units", k, "read")
            L.append(f"| {k} | {(512**3*4)/wt/1e6:.0f} | {(512**3*4)/rt/1e6:.0f} |" if wt == wt else f"| {k} | - | - |")
        L.append("")

    if any(k[0] == "fig15" for k in s):
        bs = [128, 512, 2048, 8192]
        raw = m("fig15", "raw")
        L += ["## Writing a block-cyclic array (iWarp Fig. 15), 4 ranks, canonical file", "",
              "| block | with reshuffling s | without s | raw stream (dd) s |", "|---|---|---|---|"]
        for b in bs:
            L.append(f"| {b} B | {m('fig15', b, 'always'):.4f} | {m('fig15', b, 'never'):.4f} | {raw:.4f} |")
        L.append("")
        svg_lines(os.path.join(d, "fig15.svg"), "Writing a block-cyclic array (lower is better)", "block size (bytes)", "seconds",
                  bs, [("with reshuffling", [m("fig15", b, "always") for b in bs]), ("without", [m("fig15", b, "never") for b in bs]), ("raw stream", [raw for _ in bs])])

    if any(k[0] == "shortruns" for k in s):
        L += ["## Single-element runs against long runs (`shortruns`): median seconds, ratio of bandwidths (goal >= 0.2)", "",
              "| kind | ranks | type | op | block s | cyclic s | cyclic / block bandwidth |", "|---|---|---|---|---|---|---|"]
        for k in sorted({(k[1], k[2], k[3], k[5]) for k in s if k[0] == "shortruns"}):
            kind, p, t, op = k
            b, c = m("shortruns", kind, p, t, "block", op), m("shortruns", kind, p, t, "cyclic", op)
            L.append(f"| {kind} | {p} | {t} | {op} | {b:.4f} | {c:.4f} | {b / c:.2f} |")
        L.append("")
    if any(k[0] == "shapes" for k in s):
        L += ["## Single-element runs in N-d shapes (`shapes`): short-run layout / row blocks, ratio of bandwidths (goal >= 0.2)", "",
              "| shape | format | ranks | write | read |", "|---|---|---|---|---|"]
        for k in sorted({(k[1], k[2], k[3]) for k in s if k[0] == "shapes"}):
            name, kind, p = k
            cells = []
            for op in ("write", "read"):
                b, c = m("shapes", name, kind, p, "rows", op), m("shapes", name, kind, p, "short", op)
                cells.append(f"{b / c:.2f}" if b == b and c == c else "")
            L.append(f"| {name} | {kind} | {p} | {cells[0]} | {cells[1]} |")
        L.append("")
    if any(k[0] == "pipes" for k in s):
        L += ["## Parallel pipes (nCUBE Tables 1 and 2): aggregate MB/s, s = r ranks", ""]
        for n in sorted({int(k[1]) for k in s if k[0] == "pipes"}):
            combos = sorted({(k[3], k[4]) for k in s if k[0] == "pipes" and k[1] == str(n)})
            L += [f"u8[{n},{n}]:", "", "| producer -> consumer | " + " | ".join(f"s=r={p}" for p in (1, 2, 4, 8)) + " |", "|---|---|---|---|---|"]
            for a, b in combos:
                L.append(f"| {a} -> {b} | " + " | ".join(f"{m('pipes', n, p, a, b):.0f}" for p in (1, 2, 4, 8)) + " |")
            rc = [m("pipes", n, p, "row", "col") / m("pipes", n, p, "row", "row") for p in (1, 2, 4, 8)]
            L += ["", f"row -> column as a fraction of row -> row: " + ", ".join(f"{x:.2f}" for x in rc), ""]
    if any(k[0] == "rss" for k in s):
        L += ["## Memory: peak RSS per rank writing one file (4 ranks, canonical, 2x2x1 blocks)", ""]
        if ("rss", "skipped") in s:
            L += [f"Skipped: {s[('rss', 'skipped')][-1]}.", ""]
        else:
            nbytes = m("rss", "bytes")
            L += [f"File of {nbytes / 2**30:.2f} GiB. Goal: peak RSS <= own data + 64 MiB. Medians of the runs.", "",
                  "| writer | write s | rank | peak RSS MiB | own data MiB | above own data MiB | goal |", "|---|---|---|---|---|---|---|"]
            for mode in ("auto", "always"):
                ranks = sorted({int(k[2]) for k in s if k[:2] == ("rss", mode) and k[-1] == "peak_kib"})
                two = s.get(("rss", mode, "two_phase"), [])
                name = ("two-phase (aggregators)" if all(two) else "direct" if not any(two) else "mixed") + f", --reshuffle {mode}"
                for r in ranks:
                    peak, own = m("rss", mode, r, "peak_kib") / 1024, m("rss", mode, r, "buffer_bytes") / 2**20
                    L.append(f"| {name} | {m('rss', mode, 'write_s'):.2f} | {r} | {peak:.0f} | {own:.0f} | {peak - own:.0f} | {'PASS' if peak <= own + 64 else 'MISS'} |")
            L.append("")
    if any(k[0] == "formats" for k in s):
        L += ["## Formats: Zarr v3 and HDF5, f32 array, 4 ranks (peers as stated)", "",
              "Seconds, medians of the alternating runs; every file written fresh. Spools: 4 ranks "
              "from `block,*,*`; zarr-python and h5py: one process; zarrs: one process with its threads; "
              "parallel HDF5: 4 ranks, MPI-IO, collective.", "",
              "| format | writer | write s | read s | Spools write speed-up | Spools read speed-up |", "|---|---|---|---|---|---|"]
        goals = []
        for codec in ("none", "zstd"):
            sw, sr = m("formats", "zarr", codec, "spools", "write"), m("formats", "zarr", codec, "spools", "read")
            for who in ("spools", "zarr-python", "zarrs"):
                w, r = m("formats", "zarr", codec, who, "write"), m("formats", "zarr", codec, who, "read")
                L.append(f"| Zarr {codec} | {who} | {w:.3f} | {r:.3f} | {w / sw:.2f}x | {r / sr:.2f}x |")
            goals.append(f"Zarr {codec}: write {m('formats', 'zarr', codec, 'zarr-python', 'write') / sw:.2f}x zarr-python's (goal >= 3x: {'PASS' if m('formats', 'zarr', codec, 'zarr-python', 'write') / sw >= 3 else 'MISS'}), {m('formats', 'zarr', codec, 'zarrs', 'write') / sw:.2f}x zarrs' (goal >= 1.5x: {'PASS' if m('formats', 'zarr', codec, 'zarrs', 'write') / sw >= 1.5 else 'MISS'})")
        sw, sr = m("formats", "hdf5", "spools", "write"), m("formats", "hdf5", "spools", "read")
        for who in ("spools", "canonical", "h5py", "parallel-hdf5"):
            if ("formats", "hdf5", who, "write") in s:
                w, r = m("formats", "hdf5", who, "write"), m("formats", "hdf5", who, "read")
                L.append(f"| HDF5 | {who} | {w:.3f} | {r:.3f} | {w / sw:.2f}x | {r / sr:.2f}x |")
        can = m("formats", "hdf5", "canonical", "write")
        goals.append(f"HDF5 write {can / sw:.2f}x the canonical file's speed (goal >= 0.9x: {'PASS' if can / sw >= 0.9 else 'MISS'})")
        if ("formats", "hdf5", "parallel-hdf5", "write") in s:
            ph = m("formats", "hdf5", "parallel-hdf5", "write")
            goals.append(f"HDF5 write {ph / sw:.2f}x parallel HDF5's speed (goal >= 1.5x: {'PASS' if ph / sw >= 1.5 else 'MISS'})")
        L += ["", "Speed-up: the writer's time over Spools' (above 1: Spools is faster)."]
        L += [""] + [f"- {g}" for g in goals] + [""]
    with open(os.path.join(d, "summary.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
