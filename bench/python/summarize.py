#!/usr/bin/env python3
"""Summarises the samples of bench/python/run.py as a Markdown table.

usage: bench/python/summarize.py DIR/runs.jsonl [MORE/runs.jsonl ...] [--host DIR/host.txt]

Several files are pooled as one set of runs (the runs of each file numbered after the
previous file's).

For every figure: the median over the runs of spools and of mpi4py, and the ratio
"spools ahead" (mpi4py's time over spools', or spools' bandwidth over mpi4py's: above 1
spools is faster), both as the ratio of the medians and as the median of the ratios taken
within each run (the two sides of one run ran back to back), with the issue's goals (met
when both ratios reach it, split when only one does).

With the side mpi4py-spools (the same mpi4py program, mpi4py built against the MPI standard
ABI, on Spools' libmpi_abi.so.1) two more columns: its median, and "mpi4py on Spools /
mpi4py on Open MPI", the ratio of the medians of the same figure (times: below 1 Spools is
faster; bandwidths: above 1 Spools is faster) with the median of the per-run ratios in
parentheses.
"""

import argparse
import json
import statistics
from collections import defaultdict

# (test, case, metric, label, unit, higher is better, goal on "spools ahead" or None)
ROWS = [
    ("pingpong", "8B", "one_way_us", "ping-pong 8 B, one-way latency (2 ranks)", "us", False, 1.0),
    ("pingpong", "1MiB", "mb_s", "ping-pong 1 MiB, bandwidth (2 ranks)", "MB/s", True, 1.0),
    ("pingpong", "1MiB", "one_way_us", "ping-pong 1 MiB, one-way time (2 ranks)", "us", False, None),
    ("coll", "allreduce_8B", "us", "allreduce 8 B, sum (4 ranks)", "us", False, None),
    ("coll", "allreduce_1MiB", "us", "allreduce 1 MiB, sum (4 ranks)", "us", False, None),
    ("coll", "bcast_1MiB", "us", "bcast 1 MiB (4 ranks)", "us", False, None),
    (
        "redist",
        "rows_block_to_cyclic",
        "ms",
        "redistribute f64[2048,2048] `block,*` -> `cyclic,*` on 4x1",
        "ms",
        False,
        2.0,
    ),
    (
        "redist",
        "2x2_block_to_cyclic",
        "ms",
        "redistribute f64[2048,2048] `block,block` -> `cyclic,cyclic` on 2x2",
        "ms",
        False,
        None,
    ),
]


def fmt(x):
    if x != x:  # nan
        return "n/a"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    if x >= 1:
        return "%.2f" % x
    return "%.3f" % x


ABI = "mpi4py-spools"


def abi_cells(per, unit):
    """The cells of mpi4py on Spools: its median, and its ratio to mpi4py on Open MPI."""
    a = (per or {}).get(ABI)
    mp = (per or {}).get("mpi4py")
    if not a:
        return " n/a | n/a |"
    ma = statistics.median(a.values())
    if not mp:
        return " %s %s | n/a |" % (fmt(ma), unit)
    mm = statistics.median(mp.values())
    both = sorted(set(a) & set(mp))
    per_run = statistics.median([a[r] / mp[r] for r in both]) if both else float("nan")
    return " %s %s | %.2f (%.2f) |" % (fmt(ma), unit, ma / mm, per_run)


def extras(per, extra, higher):
    """The cells of the extra spools sides: median, and its "ahead" ratio against mpi4py."""
    cells = ""
    mp = (per or {}).get("mpi4py")
    for e in extra:
        v = (per or {}).get(e)
        if not v:
            cells += " n/a |"
            continue
        m = statistics.median(v.values())
        if mp and not e.startswith("native:"):
            mm = statistics.median(mp.values())
            cells += " %s (ahead %.2f) |" % (fmt(m), (m / mm) if higher else (mm / m))
        else:
            cells += " %s |" % fmt(m)
    return cells


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("samples", nargs="+")
    ap.add_argument("--host")
    args = ap.parse_args()

    # value[(test, case, metric)][impl][run] = number
    value = defaultdict(lambda: defaultdict(dict))
    runs = set()
    loads = []
    offset = 0
    for path in args.samples:
        last = 0
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        for doc in lines:
            last = max(last, doc["run"])
            doc["run"] += offset
            runs.add(doc["run"])
            if doc.get("loadavg_before") is not None:
                loads.append(doc["loadavg_before"])
            for case, metrics in doc["results"].items():
                for metric, v in metrics.items():
                    value[(doc["test"], case, metric)][doc["impl"]][doc["run"]] = v
        offset += last

    out = []
    if args.host:
        with open(args.host) as f:
            out.append("```text\n" + f.read().rstrip() + "\n```\n")
    out.append(
        "Medians of %d alternating runs; \"spools ahead\" is mpi4py's time over spools' "
        "(bandwidth: spools' over mpi4py's), above 1 spools is faster.\n" % len(runs)
    )
    if loads:
        out.append(
            "Load average (1 min) before the jobs: median %.1f, from %.1f to %.1f (2 cores).\n"
            % (statistics.median(loads), min(loads), max(loads))
        )
    impls = {impl for per in value.values() for impl in per}
    abi = ABI in impls
    extra = sorted(impls - {"spools", "mpi4py", ABI})
    if abi:
        out.append(
            "mpi4py is mpi4py on Open MPI; mpi4py on Spools is the same program and mpi4py "
            "built against the MPI standard ABI, under `spools run` on Spools' libmpi_abi.so.1. "
            "Its ratio is of the figures themselves (times: below 1 Spools is faster; "
            "bandwidth: above 1), median of per-run ratios in parentheses.\n"
        )
    abi_head = " mpi4py on Spools | mpi4py on Spools / mpi4py on Open MPI |" if abi else ""
    out.append(
        "| | spools | mpi4py | spools ahead (medians) | spools ahead (median of per-run ratios) | goal |"
        + abi_head
        + "".join(" %s |" % e for e in extra)
    )
    out.append("|---|---:|---:|---:|---:|---|" + "---:|" * ((2 if abi else 0) + len(extra)))
    for test, case, metric, label, unit, higher, goal in ROWS:
        per = value.get((test, case, metric))
        if not per:
            continue  # not run
        if "spools" not in per or "mpi4py" not in per:
            sp = per.get("spools", {}) if per else {}
            mp = per.get("mpi4py", {}) if per else {}
            ms = statistics.median(sp.values()) if sp else float("nan")
            mm = statistics.median(mp.values()) if mp else float("nan")
            out.append(
                "| %s | %s %s | %s %s | n/a | n/a | %s |" % (label, fmt(ms), unit, fmt(mm), unit, "n/a")
                + (abi_cells(per, unit) if abi else "")
                + extras(per, extra, higher)
            )
            continue
        sp, mp = per["spools"], per["mpi4py"]
        ms, mm = statistics.median(sp.values()), statistics.median(mp.values())
        ahead = ms / mm if higher else mm / ms
        both = sorted(set(sp) & set(mp))
        ratios = [(sp[r] / mp[r]) if higher else (mp[r] / sp[r]) for r in both]
        per_run = statistics.median(ratios) if ratios else float("nan")
        if goal is None:
            g = ""
        else:
            # Met only when both ratios reach the goal; split when one does.
            hits = (ahead >= goal) + (per_run >= goal)
            g = "≥ %.0f: %s" % (goal, ["not met", "split", "met"][hits])
        out.append(
            "| %s | %s %s | %s %s | %.2f | %.2f (%s) | %s |"
            % (label, fmt(ms), unit, fmt(mm), unit, ahead, per_run, " ".join("%.2f" % r for r in ratios), g)
            + (abi_cells(per, unit) if abi else "")
            + extras(per, extra, higher)
        )
    print("\n".join(out))


if __name__ == "__main__":
    main()
