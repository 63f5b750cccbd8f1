#!/usr/bin/env python3
"""Summarize the peer benchmarks written by bench/peers/run.sh.

Usage: summarize.py [DIR]   (default: target/bench-peers)

Reads every JSON document in DIR, takes medians over the runs per (program, path, size), and
prints Markdown tables on stdout: the goals (each measured median against its reference from
the same run, with PASS/MISS), ping-pong latency and bandwidth of Spools and Open MPI side by
side (shared memory, then TCP), the LogP signature, the message rate, the token-ring hop
times, the start-up of a job, the raw limits of the host, and the raw probes every Spools
benchmark takes at its start and end. Also writes DIR/latency.svg and DIR/bandwidth.svg
(log-log, one line per series). What is missing is reported as "not measured".

Documents are named PROGRAM.runI.json; I pairs the documents of one run. PROGRAM is
"BENCHMARK-LABEL": LABEL ("spools-shm", "spools-tcp", "mpi-default", "mpi-tuned", "mpi-tcp",
...) names the series of a ping-pong and says which system and transport the other
benchmarks (rate, logp, idle, init, launch) measured; ring and raw documents are recognised by
their "benchmark" field and fields.

The documents of the msg suite (run.sh --suite msg) get a section of their own, "Messaging":
its goals, collective latency (coll-spools-PN, coll-mpi-PN), the matrix multiply
(matmul-spools-nN-PP, matmul-mpi-nN-PP), ping-pong through the tagged API against active
messages and Open MPI (msg-pingpong-spools-tagged, msg-pingpong-spools-am, msg-pingpong-mpi;
the core suite's pingpong-spools-shm and pingpong-mpi-default stand in for the last two when
the msg suite has none), and communication/computation overlap (overlap-spools,
overlap-spools-thread). What is missing there is shown as "n/a". The core sections are left
out when there are only msg documents, and the Messaging section when there are none.
Python standard library only.
"""

import html
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

RUN_FILE = re.compile(r"^(?P<program>.+?)\.run(?P<run>\d+)\.json$")
MISSING = "–"
NOT_MEASURED = "not measured"
MSG_KINDS = ("coll", "matmul", "overlap")
MSG_PINGPONG = "msg-pingpong-"


def warn(message):
    print(f"summarize.py: {message}", file=sys.stderr)


# --- Loading ---------------------------------------------------------------------------------


class Results:
    """Every measurement of a directory, as lists of values over the runs."""

    def __init__(self):
        # pingpong[label][path][bytes] = {"lat": [...], "bw": [...]}
        self.pingpong = defaultdict(
            lambda: defaultdict(lambda: defaultdict(lambda: {"lat": [], "bw": []}))
        )
        self.ring = defaultdict(lambda: defaultdict(list))  # ring[system][ranks] = [hop_us]
        self.ring_rounds = defaultdict(set)  # ring_rounds[system] = {rounds}
        self.raw = defaultdict(list)  # raw[key] = [...]
        self.memcpy = defaultdict(list)  # memcpy[bytes] = [GB/s]
        self.runs = set()
        self.documents = 0
        # Every document as (run, program, doc), for the sections that pair documents by run
        # (run 0 for a file not named PROGRAM.runI.json).
        self.docs = []
        # The same for the documents of the msg suite (kept apart from the core tables).
        self.msg = []


def number(value):
    """A finite float, or None for anything else (missing fields, NaN, strings)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def default_label(doc):
    transport = str(doc.get("transport", "unknown"))
    return "mpi" if transport == "mpi" else f"spools-{transport}"


def load(directory):
    results = Results()
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            warn(f"skipping {path.name}: {err}")
            continue
        if not isinstance(doc, dict) or "benchmark" not in doc:
            warn(f"skipping {path.name}: not a benchmark document")
            continue
        match = RUN_FILE.match(path.name)
        program = match.group("program") if match else path.stem
        run = int(match.group("run")) if match else 0
        kind = doc["benchmark"]
        if is_msg_document(program, kind):
            results.msg.append((run, program, doc))
            if match:
                results.runs.add(run)
            results.documents += 1
            continue
        if kind == "pingpong":
            load_pingpong(results, program, doc)
        elif kind == "ring":
            load_ring(results, program, doc)
        elif kind == "raw":
            load_raw(results, doc)
        elif kind not in ("rate", "logp", "idle", "init", "launch"):
            warn(f"skipping {path.name}: unknown benchmark {kind!r}")
            continue
        if match:
            results.runs.add(run)
        results.documents += 1
        results.docs.append((run, program, doc))
    return results


def is_msg_document(program, kind):
    """A document of the msg suite: collectives, matrix multiply, overlap, or one of its
    ping-pongs (named msg-pingpong-LABEL)."""
    return kind in MSG_KINDS or (kind == "pingpong" and program.startswith(MSG_PINGPONG))


def load_pingpong(results, program, doc):
    if program.startswith("pingpong-"):
        label = program[len("pingpong-") :]
    else:
        label = default_label(doc)
    for series in doc.get("series", []):
        path = str(series.get("path", "?"))
        for point in series.get("points", []):
            size = point.get("bytes")
            if not isinstance(size, int) or size <= 0:
                continue
            cell = results.pingpong[label][path][size]
            latency = number(point.get("latency_us"))
            bandwidth = number(point.get("bandwidth_MBps"))
            if latency is not None and latency > 0:
                cell["lat"].append(latency)
            if bandwidth is not None and bandwidth > 0:
                cell["bw"].append(bandwidth)


def load_ring(results, program, doc):
    system = default_label(doc)
    ranks = doc.get("ranks")
    if not isinstance(ranks, int):
        found = re.search(r"-n(\d+)$", program)
        ranks = int(found.group(1)) if found else None
        doc["ranks"] = ranks  # for the goals, which read the documents again
    hop = number(doc.get("hop_us"))
    if ranks is None or hop is None:
        warn(f"skipping a ring document of {program}: no ranks or hop_us")
        return
    results.ring[system][ranks].append(hop)
    if isinstance(doc.get("rounds"), int):
        results.ring_rounds[system].add(doc["rounds"])


def load_raw(results, doc):
    for size, value in (doc.get("memcpy_GBps") or {}).items():
        if str(size).isdigit() and number(value) is not None:
            results.memcpy[int(size)].append(number(value))
    for key in ("tcp_pingpong_us", "tcp_stream_MBps", "pipe_wake_us"):
        if number(doc.get(key)) is not None:
            results.raw[key].append(number(doc[key]))


# --- Series ----------------------------------------------------------------------------------


def display(label):
    """'spools-shm' -> 'Spools shm', 'mpi-default' -> 'MPI default'."""
    words = label.split("-")
    first = {"spools": "Spools", "mpi": "MPI"}.get(words[0], words[0])
    return " ".join([first] + words[1:])


def is_mpi(label):
    return label.split("-")[0] == "mpi"


def medium(label):
    """Which table group a ping-pong label belongs to: 'tcp' or 'shm'."""
    return "tcp" if "tcp" in label.split("-") else "shm"


def label_order(label):
    """Spools before MPI; MPI as installed, then tuned, then the rest."""
    rank = {"default": 0, "tuned": 1}
    rest = label.split("-", 1)[1] if "-" in label else ""
    return (is_mpi(label), rank.get(rest, 2), label)


def path_order(path):
    return ({"short": 0, "bulk": 1, "memory": 2}.get(path, 3), path)


class Series:
    """One line of the plots and one column of the tables: medians per message size."""

    def __init__(self, label, path, cells):
        self.label = label
        self.path = path
        self.mpi = is_mpi(label)
        self.name = display(label) if self.mpi else f"{display(label)} {path}"
        self.lat = {s: statistics.median(c["lat"]) for s, c in cells.items() if c["lat"]}
        self.bw = {s: statistics.median(c["bw"]) for s, c in cells.items() if c["bw"]}
        # Run-to-run spread of the latency per size (slowest ÷ fastest run) and the run count.
        self.spread = {s: max(c["lat"]) / min(c["lat"]) for s, c in cells.items() if c["lat"]}
        self.runs = max((len(c["lat"]) for c in cells.values()), default=0)


def build_series(results):
    series = []
    for label in sorted(results.pingpong, key=label_order):
        for path in sorted(results.pingpong[label], key=path_order):
            series.append(Series(label, path, results.pingpong[label][path]))
    return series


# --- Formatting ------------------------------------------------------------------------------


def human_size(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} B"


def fmt(value):
    """Three significant digits or so, without exponents."""
    if value is None:
        return MISSING
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def fmt_ratio(value):
    return MISSING if value is None else f"{value:.2f}"


def ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def table(header, rows):
    align = ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- Tables ----------------------------------------------------------------------------------


def best(spools, size, metric):
    """Best Spools value at a size over the given series: (value, path) or (None, None)."""
    values = [(getattr(s, metric)[size], s.path) for s in spools if size in getattr(s, metric)]
    if not values:
        return None, None
    pick = min if metric == "lat" else max
    return pick(values, key=lambda v: v[0])


def pingpong_tables(series, group):
    spools = [s for s in series if not s.mpi and medium(s.label) == group]
    mpi = [s for s in series if s.mpi and medium(s.label) == group]
    if not spools and not mpi:
        return []
    where = "TCP loopback" if group == "tcp" else "shared memory"
    out = []
    for metric, title, unit in (("lat", "latency, one way", "us"), ("bw", "bandwidth", "MB/s")):
        sizes = sorted({size for s in spools + mpi for size in getattr(s, metric)})
        if not sizes:
            continue
        header = ["size"] + [f"{s.name} ({unit})" for s in spools + mpi]
        if spools and mpi:
            header.append(f"Spools best ({unit})")
            if metric == "lat":
                header += [f"{m.name} ÷ Spools" for m in mpi]
            else:
                header += [f"Spools ÷ {m.name}" for m in mpi]
        rows = []
        for size in sizes:
            row = [human_size(size)] + [fmt(getattr(s, metric).get(size)) for s in spools + mpi]
            if spools and mpi:
                value, path = best(spools, size, metric)
                row.append(MISSING if value is None else f"{fmt(value)} ({path})")
                for m in mpi:
                    theirs = getattr(m, metric).get(size)
                    row.append(
                        fmt_ratio(ratio(theirs, value) if metric == "lat" else ratio(value, theirs))
                    )
            rows.append(row)
        out.append(f"### Ping-pong {title} over {where} ({unit})")
        if spools and mpi:
            if metric == "lat":
                out.append(
                    "Ratio columns are MPI latency ÷ the best Spools latency at that size: "
                    "**> 1 means Spools is faster**."
                )
            else:
                out.append(
                    "Ratio columns are the best Spools bandwidth ÷ MPI bandwidth at that size: "
                    "**> 1 means Spools is faster**."
                )
        out.append(table(header, rows))
    return out


def ring_table(results):
    if not results.ring:
        return []
    systems = sorted(results.ring, key=lambda s: (s == "mpi", s))
    spools = [s for s in systems if s != "mpi"]
    ranks = sorted({n for s in systems for n in results.ring[s]})
    header = ["ranks"] + [f"{display(s)} hop (us)" for s in systems]
    if "mpi" in results.ring:
        header += [f"MPI ÷ {display(s)}" for s in spools]
    rows = []
    for n in ranks:
        hops = {s: results.ring[s].get(n) for s in systems}
        med = {s: statistics.median(v) for s, v in hops.items() if v}
        row = [str(n)] + [fmt(med.get(s)) for s in systems]
        if "mpi" in results.ring:
            row += [fmt_ratio(ratio(med.get("mpi"), med.get(s))) for s in spools]
        rows.append(row)
    rounds = "; ".join(
        f"{display(s)}: {', '.join(str(r) for r in sorted(results.ring_rounds[s]))} rounds"
        for s in systems
        if results.ring_rounds[s]
    )
    lines = ["### Token ring, one hop (us)"]
    note = "An 8-byte token passed around all ranks; hop = total time ÷ (rounds × ranks)."
    if spools and "mpi" in results.ring:
        note += " Ratio columns are MPI hop ÷ Spools hop: **> 1 means Spools is faster**."
    if rounds:
        note += f" ({rounds}.)"
    lines += [note, table(header, rows)]
    return lines


def raw_tables(results, series):
    out = []
    shm = [
        s
        for s in series
        if medium(s.label) == "shm" and any(size in s.bw for size in results.memcpy)
    ]
    if results.memcpy:
        header = ["size", "memcpy (GB/s)"] + [f"{s.name} ÷ memcpy" for s in shm]
        rows = []
        for size in sorted(results.memcpy):
            copy = statistics.median(results.memcpy[size])
            row = [human_size(size), fmt(copy)]
            row += [fmt_ratio(ratio(s.bw.get(size), copy * 1000)) for s in shm]
            rows.append(row)
        out.append("### Ping-pong bandwidth as a fraction of one core's memcpy")
        out.append(
            "memcpy: one thread copying between two buffers of that size (10^9 B/s). "
            "The other columns divide each series' ping-pong bandwidth at the same size by it: "
            "1.00 means the transport moves a message as fast as one core copies it."
        )
        out.append(table(header, rows))

    def at(labels, size, metric):
        """Best value over the series of the given labels at one size."""
        picked = [s for s in series if s.label in labels]
        value, _ = best(picked, size, metric) if picked else (None, None)
        return value

    tcp_spools = {s.label for s in series if not s.mpi and medium(s.label) == "tcp"}
    largest = max((size for s in series for size in s.bw), default=None)
    raw = {key: statistics.median(v) for key, v in results.raw.items() if v}
    rows = []
    if "tcp_pingpong_us" in raw or tcp_spools:
        rows.append(
            [
                "8 B one-way over TCP loopback (us)",
                fmt(raw.get("tcp_pingpong_us")),
                fmt(at(tcp_spools, 8, "lat")),
                fmt(at({"mpi-tcp"}, 8, "lat")),
            ]
        )
    if "tcp_stream_MBps" in raw:
        rows.append(
            [
                "TCP loopback stream, 1 MiB writes (MB/s); Spools/MPI: ping-pong at "
                + (human_size(largest) if largest else "the largest size"),
                fmt(raw.get("tcp_stream_MBps")),
                fmt(at(tcp_spools, largest, "bw")) if largest else MISSING,
                fmt(at({"mpi-tcp"}, largest, "bw")) if largest else MISSING,
            ]
        )
    if "pipe_wake_us" in raw:
        rows.append(["pipe wake-up, one way (us)", fmt(raw["pipe_wake_us"]), MISSING, MISSING])
    if rows:
        out.append("### Raw limits of the host")
        out.append(
            "Raw: the raw probe (plain sockets and pipes between two processes, no library). "
            "TCP ping-pong busy-polls non-blocking sockets with TCP_NODELAY. "
            "The Spools column takes the best TCP path. The probes Spools takes itself, and "
            "its own pipe wake-up (goal e), are in other sections."
        )
        out.append(table(["probe", "raw", "Spools", "MPI tcp"], rows))
    return out


def spread_table(results, series):
    """How much the runs disagree: slowest ÷ fastest run, per series, over the sizes."""
    rows = []
    for s in series:
        if not s.spread:
            continue
        worst = max(s.spread, key=s.spread.get)
        rows.append(
            [
                s.name,
                str(s.runs),
                fmt_ratio(statistics.median(s.spread.values())),
                f"{fmt_ratio(s.spread[worst])} at {human_size(worst)}",
            ]
        )
    for system in sorted(results.ring, key=lambda name: (name == "mpi", name)):
        for n, values in sorted(results.ring[system].items()):
            if not values:
                continue
            name = f"{display(system)} ring, {n} ranks"
            rows.append([name, str(len(values)), fmt_ratio(max(values) / min(values)), MISSING])
    if not rows:
        return []
    return [
        "### Run-to-run spread",
        "Latency of the slowest run ÷ the fastest, per size: near 1.00 the medians above are "
        "solid; a large spread means the host was noisy (other load, virtual CPUs moved), and "
        "more --runs help.",
        table(["series", "runs", "median over sizes", "worst"], rows),
    ]


# --- Goals and the other Spools benchmarks ---------------------------------------------------

KIB, MIB = 1 << 10, 1 << 20
BULK_PATHS = {"bulk", "memory"}


def doc_label(program, doc):
    """What a document measured: 'rate-spools-tcp' -> 'spools-tcp', 'launch-mpi' -> 'mpi'.
    A document not named BENCHMARK-LABEL is labelled by its fields."""
    if doc.get("benchmark") == "launch" and isinstance(doc.get("launcher"), str):
        return doc["launcher"]
    prefix = f"{doc.get('benchmark')}-"
    if program.startswith(prefix) and len(program) > len(prefix):
        return program[len(prefix) :]
    return default_label(doc)


def is_spools(label):
    return not is_mpi(label)


def any_label(_label):
    return True


def labelled(label):
    """A test for documents of exactly this label."""
    return lambda other: other == label


def collect(results, kinds, want, value):
    """{run: value} over the documents of the given benchmark(s) whose label want() accepts.
    value(doc) extracts one number (None: not in this document); several documents of one run
    (run.sh writes one) give their median."""
    if isinstance(kinds, str):
        kinds = (kinds,)
    found = defaultdict(list)
    for run, program, doc in results.docs:
        if doc.get("benchmark") in kinds and want(doc_label(program, doc)):
            v = value(doc)
            if v is not None:
                found[run].append(v)
    return {run: statistics.median(v) for run, v in found.items()}


def pooled(results, kinds, want, values):
    """Every value over the matching documents of all runs; values(doc) gives a list."""
    if isinstance(kinds, str):
        kinds = (kinds,)
    out = []
    for _, program, doc in results.docs:
        if doc.get("benchmark") in kinds and want(doc_label(program, doc)):
            out += values(doc)
    return out


def median_of(per_run):
    return statistics.median(per_run.values()) if per_run else None


def point(doc, field, size, paths=None, pick=min):
    """Best value of one field at one message size over a ping-pong document's series (all of
    them, or those whose path is in paths); pick=min for latency, max for bandwidth."""
    values = []
    for series in doc.get("series") or []:
        if not isinstance(series, dict):
            continue
        if paths is not None and series.get("path") not in paths:
            continue
        for p in series.get("points") or []:
            if isinstance(p, dict) and p.get("bytes") == size:
                v = number(p.get(field))
                if v is not None and v > 0:
                    values.append(v)
    return pick(values) if values else None


def pingpong_sizes(results, want, paths=None):
    sizes = set()
    for _, program, doc in results.docs:
        if doc.get("benchmark") != "pingpong" or not want(doc_label(program, doc)):
            continue
        for series in doc.get("series") or []:
            if isinstance(series, dict) and (paths is None or series.get("path") in paths):
                sizes |= {
                    p["bytes"]
                    for p in series.get("points") or []
                    if isinstance(p, dict) and isinstance(p.get("bytes"), int)
                }
    return sizes


def probe(doc, name, size=None, which="probe"):
    """One raw probe value of a Spools document: doc[which][name], or [name][size]."""
    block = doc.get(which)
    value = block.get(name) if isinstance(block, dict) else None
    if size is not None:
        value = value.get(str(size)) if isinstance(value, dict) else None
    return number(value)


def scaled(value, factor):
    return None if value is None else value * factor


def numbers(values):
    if not isinstance(values, list):
        return []
    return [v for v in map(number, values) if v is not None]


def job_inits(doc):
    """Init time of every job of a document, each the max over its ranks (ms). A launch
    document holds one per-rank list per job; an init document is one job."""
    init = doc.get("init_ms")
    if not isinstance(init, list):
        return []
    jobs = init if doc.get("benchmark") == "launch" and not numbers(init) else [init]
    return [max(ranks) for ranks in map(numbers, jobs) if ranks]


def job_walls(doc):
    return numbers(doc.get("wall_ms"))


def median_or_none(values):
    return statistics.median(values) if values else None


def fmt_or_not(value, unit=""):
    if value is None:
        return NOT_MEASURED
    return f"{fmt(value)} {unit}".rstrip()


def fmt_spread(values):
    """'median (min–max)' of a list, or the missing mark."""
    if not values:
        return MISSING
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


class Goal:
    """One row of the goals table.

    measured and reference map run -> value (reference None: a goal against a fixed number).
    check: 'ratio<=' or 'ratio>=' (measured ÷ reference of the same run, against target),
    'diff<=' (measured − reference of the same run), '<' or '>=' (measured alone; a reference
    is then shown for comparison). The verdict takes the median over runs of the per-run
    ratio (difference, value); runs without both numbers are left out of it, and if no run
    has both, the ratio of the medians stands in."""

    CHECKS = {
        "ratio<=": lambda x, t: x <= t,
        "ratio>=": lambda x, t: x >= t,
        "diff<=": lambda x, t: x <= t,
        "<": lambda x, t: x < t,
        ">=": lambda x, t: x >= t,
    }

    def __init__(self, name, measured, unit, check, target, target_text, reference=None, ref=""):
        self.name, self.measured, self.unit = name, measured, unit
        self.check, self.target, self.target_text = check, target, target_text
        self.reference, self.ref = reference, ref

    def row(self):
        m = median_of(self.measured)
        r = median_of(self.reference) if self.reference is not None else None
        ref = self.reference or {}
        if self.check.startswith("ratio"):
            per = {k: v / ref[k] for k, v in self.measured.items() if ref.get(k)}
            stat = median_of(per) if per else ratio(m, r)
            shown = fmt_ratio(stat)
        elif self.check == "diff<=":
            per = {k: v - ref[k] for k, v in self.measured.items() if k in ref}
            stat = median_of(per)
            if stat is None and m is not None and r is not None:
                stat = m - r
            shown = MISSING if stat is None else f"{stat:+.2f} {self.unit}"
        else:
            per = dict(self.measured)
            stat = m
            shown = fmt_ratio(ratio(m, r))
        ok = self.CHECKS[self.check]
        if self.reference is None:
            reference = MISSING
        elif r is None:
            reference = f"{self.ref}: {NOT_MEASURED}"
        else:
            reference = f"{fmt(r)} {self.unit} ({self.ref})"
        passing = f"{sum(ok(x, self.target) for x in per.values())}/{len(per)}" if per else MISSING
        if stat is None:
            verdict = NOT_MEASURED
        else:
            verdict = "**PASS**" if ok(stat, self.target) else "**MISS**"
        return [
            self.name,
            fmt_or_not(m, self.unit),
            reference,
            shown,
            self.target_text,
            passing,
            verdict,
        ]


def goals(results):
    shm, tcp = labelled("spools-shm"), labelled("spools-tcp")
    pp = "pingpong"
    out = []

    # a. Short messages over shared memory against the bare ring and against Open MPI.
    short8 = collect(results, pp, shm, lambda d: point(d, "latency_us", 8, {"short"}))
    floor = collect(results, pp, shm, lambda d: scaled(probe(d, "ring_floor_ns"), 1e-3))
    mpi8 = collect(results, pp, labelled("mpi-default"), lambda d: point(d, "latency_us", 8))
    out.append(
        Goal(
            "a. shm short latency, 8 B one way ÷ ring floor",
            short8, "us", "ratio<=", 1.3, "≤ 1.30", floor, "probe ring floor",
        )
    )
    out.append(
        Goal(
            "a. shm short latency, 8 B one way ÷ MPI default",
            short8, "us", "ratio<=", 1.0, "≤ 1.00", mpi8, "MPI default, 8 B",
        )
    )

    # b. Batched message rate.
    batched = collect(results, "rate", shm, lambda d: number(d.get("batched_Mmsgs")))
    out.append(Goal("b. shm batched message rate", batched, "M/s", ">=", 50.0, "≥ 50 M/s"))

    # c. Bandwidth of the bulk and memory paths against memcpy of the same run, and Open MPI.
    def bandwidth(want, size, paths):
        """Ping-pong bandwidth (GB/s), the best of the given paths."""
        return collect(
            results, pp, want, lambda d: scaled(point(d, "bandwidth_MBps", size, paths, max), 1e-3)
        )

    def memcpy(size):
        return collect(results, pp, shm, lambda d: probe(d, "memcpy_GBps", size))

    ours = pingpong_sizes(results, shm, BULK_PATHS)
    for size, ref in ((64 * KIB, 64 * KIB), (256 * KIB, 64 * KIB), (MIB, MIB)):
        out.append(
            Goal(
                f"c. shm bandwidth {human_size(size)} (bulk/memory) ÷ memcpy {human_size(ref)}",
                bandwidth(shm, size, BULK_PATHS), "GB/s", "ratio>=", 0.8, "≥ 0.80",
                memcpy(ref), f"probe memcpy {human_size(ref)}",
            )
        )
    for size in sorted(s for s in ours if s >= 16 * MIB) or [16 * MIB, 64 * MIB]:
        out.append(
            Goal(
                f"c. shm bandwidth {human_size(size)} (bulk/memory) ÷ memcpy 16 MiB",
                bandwidth(shm, size, BULK_PATHS), "GB/s", "ratio>=", 0.6, "≥ 0.60",
                memcpy(16 * MIB), "probe memcpy 16 MiB",
            )
        )
    tuned = labelled("mpi-tuned")
    both = ours | pingpong_sizes(results, tuned)
    for size in sorted(s for s in both if MIB <= s <= 4 * MIB) or [MIB, 4 * MIB]:
        out.append(
            Goal(
                f"c. shm bandwidth {human_size(size)} (bulk/memory) ÷ MPI tuned",
                bandwidth(shm, size, BULK_PATHS), "GB/s", "ratio>=", 1.0, "≥ 1.00",
                bandwidth(tuned, size, None), "MPI tuned",
            )
        )

    # d. TCP against plain sockets.
    def raw(key):
        return collect(results, "raw", any_label, lambda d: number(d.get(key)))

    out.append(
        Goal(
            "d. tcp latency, 8 B one way ÷ raw TCP ping-pong",
            collect(results, pp, tcp, lambda d: point(d, "latency_us", 8)),
            "us", "ratio<=", 1.1, "≤ 1.10", raw("tcp_pingpong_us"), "raw TCP ping-pong",
        )
    )
    out.append(
        Goal(
            "d. tcp bandwidth 1 MiB ÷ raw TCP stream",
            collect(results, pp, tcp, lambda d: point(d, "bandwidth_MBps", MIB, None, max)),
            "MB/s", "ratio>=", 1.0, "≥ 1.00", raw("tcp_stream_MBps"), "raw TCP stream",
        )
    )

    # e. A rank blocked in a receive.
    def idle(key):
        return collect(results, "idle", is_spools, lambda d: number(d.get(key)))

    out.append(
        Goal("e. idle CPU of a blocked rank", idle("idle_cpu_percent"), "%", "<", 1.0, "< 1 %")
    )
    out.append(
        Goal(
            "e. wake-up of a blocked rank − pipe wake-up",
            idle("wake_us"), "us", "diff<=", 5.0, "≤ +5 us", idle("pipe_wake_us"), "pipe wake-up",
        )
    )

    # f. Start-up: init inside the ranks, and the whole job from outside.
    def init(want):
        return collect(results, ("launch", "init"), want, lambda d: median_or_none(job_inits(d)))

    def walls(want):
        return collect(results, "launch", want, lambda d: median_or_none(job_walls(d)))

    out.append(
        Goal(
            "f. init, max over ranks",
            init(is_spools), "ms", "<", 10.0, "< 10 ms", init(is_mpi), "Open MPI MPI_Init",
        )
    )
    out.append(
        Goal(
            "f. launch + teardown of a 2-rank job, wall",
            walls(is_spools), "ms", "<", 50.0, "< 50 ms", walls(is_mpi), "mpirun",
        )
    )

    # g. Token ring with 8 ranks (more ranks than cores: the ranks must yield well).
    def ring8(want):
        return collect(
            results, "ring", want,
            lambda d: number(d.get("hop_us")) if d.get("ranks") == 8 else None,
        )

    out.append(
        Goal(
            "g. ring, 8 ranks, hop ÷ MPI hop",
            ring8(is_spools), "us", "ratio<=", 1.0, "≤ 1.00", ring8(is_mpi), "MPI ring hop",
        )
    )
    return out


def goals_table(results):
    rows = [goal.row() for goal in goals(results)]
    header = ["goal", "measured", "reference (same run)", "ratio", "target", "runs passing"]
    header.append("result")
    single_copy = sorted(
        {
            str(doc["single_copy"])
            for _, program, doc in results.docs
            if doc.get("benchmark") == "pingpong"
            and doc_label(program, doc) == "spools-shm"
            and doc.get("single_copy") is not None
        }
    )
    lines = [
        "### Goals",
        "Measured: median over the runs. Reference: median over the runs of the number the goal "
        "is held against; a probe (ring floor, memcpy) comes from the same document, taken at "
        "its start; MPI, raw and pipe numbers come from the document of the same run. Ratio: "
        "median over the runs of measured ÷ reference of that run (for the wake-up, the "
        "difference; for goals against a fixed number, Spools ÷ Open MPI for comparison). The "
        "verdict goes by that median; \"runs passing\" counts the runs that meet the target on "
        "their own. Bandwidth rows take the better of the bulk and memory paths in each run.",
        table(header, rows),
    ]
    if single_copy:
        lines.append("Spools shm single-copy mechanism: " + "; ".join(single_copy) + ".")
    return lines


def logp_table(results):
    out = ["### LogP signature (us), as in Table 1 of the StarT-X paper"]
    docs = [(p, d) for _, p, d in results.docs if d.get("benchmark") == "logp"]
    if not docs:
        return out + [f"LogP: {NOT_MEASURED}."]
    labels = sorted({doc_label(p, d) for p, d in docs}, key=label_order)
    fields = (("o_s_us", "o_s"), ("o_r_us", "o_r"), ("g_us", "g"), ("L_us", "L"))
    rows = []
    for label in labels:
        mine = [d for p, d in docs if doc_label(p, d) == label]
        keys = {k for d in mine for k in d if re.fullmatch(r"\d+B", k)}
        for key in sorted(keys | {"16B", "64B"}, key=lambda k: int(k[:-1])):
            name = human_size(int(key[:-1]))
            if len(labels) > 1:
                name += f" ({display(label)})"
            row = [name]
            for field, _ in fields:
                per_run = collect(
                    results, "logp", labelled(label),
                    lambda d: number(d[key].get(field)) if isinstance(d.get(key), dict) else None,
                )
                row.append(fmt_or_not(median_of(per_run)))
            rows.append(row)
    out.append(
        "Medians over the runs, 2 ranks over shared memory. o_s, o_r: time the sender and the "
        "receiver spend per message; g: gap between messages sent back to back; L: latency, "
        "half the round trip less o_s and o_r."
    )
    out.append(table(["message"] + [name for _, name in fields], rows))
    return out


def rate_table(results):
    out = ["### Message rate, 2 ranks (million messages/s)"]
    transports = ("shm", "tcp")

    def per_run(transport, value):
        return collect(results, "rate", labelled(f"spools-{transport}"), value)

    rows = []
    for mode in ("immediate", "batched"):
        med = {
            t: median_of(per_run(t, lambda d: number(d.get(f"{mode}_Mmsgs")))) for t in transports
        }
        rows.append(
            [mode]
            + [fmt_or_not(med[t]) for t in transports]
            + [fmt_ratio(ratio(med["shm"], med["tcp"]))]
        )
    if all(cell == NOT_MEASURED for row in rows for cell in row[1:3]):
        return out + [f"Message rate: {NOT_MEASURED}."]
    def speedup(doc):
        return ratio(number(doc.get("batched_Mmsgs")), number(doc.get("immediate_Mmsgs")))

    speedups = [fmt_ratio(median_of(per_run(t, speedup))) for t in transports]
    rows.append(["batched ÷ immediate"] + speedups + [MISSING])
    details = []
    for t in transports:
        docs = [
            d
            for _, p, d in results.docs
            if d.get("benchmark") == "rate" and doc_label(p, d) == f"spools-{t}"
        ]
        batches = sorted({d["batch"] for d in docs if isinstance(d.get("batch"), int)})
        messages = sorted({d["messages"] for d in docs if isinstance(d.get("messages"), int)})
        if docs:
            details.append(
                f"{t}: batches of {', '.join(map(str, batches)) or '?'}, "
                f"{', '.join(f'{m:,}' for m in messages) or '?'} messages"
            )
    out.append(
        "Medians over the runs. Immediate: every message sent on its own; batched: messages "
        "handed over in batches. The batched ÷ immediate row is the median of the per-run "
        "ratios." + (f" ({'; '.join(details)}.)" if details else "")
    )
    out.append(table(["mode", "shm", "tcp", "shm ÷ tcp"], rows))
    return out


def startup_table(results):
    out = ["### Start-up of a 2-rank job (ms)"]
    kinds = {"init": ("launch", "init"), "wall": ("launch",)}
    rows = []
    for name, what, values in (
        ("init, max over ranks", "init", job_inits),
        ("launch + teardown, wall", "wall", job_walls),
    ):
        mine = pooled(results, kinds[what], is_spools, values)
        theirs = pooled(results, kinds[what], is_mpi, values)
        # Medians per run, then over the runs, as in the goals.
        a, b = (
            median_of(collect(results, kinds[what], want, lambda d: median_or_none(values(d))))
            for want in (is_spools, is_mpi)
        )
        rows.append(
            [name, fmt_or_not(a), fmt_spread(mine), fmt_or_not(b), fmt_spread(theirs),
             fmt_ratio(ratio(a, b))]
        )
    if all(row[1] == NOT_MEASURED and row[3] == NOT_MEASURED for row in rows):
        return out + [f"Start-up: {NOT_MEASURED}."]
    jobs = pooled(results, "launch", any_label, job_walls)
    docs = sum(1 for _, _, d in results.docs if d.get("benchmark") == "launch")
    out.append(
        "Init: the time a rank spends joining the job (spools init, MPI_Init), the slowest rank "
        "of each job. Wall: the whole job, launcher start to exit, timed from outside "
        f"({len(jobs)} job(s) in {docs} launch document(s)). Median: per run, then over the runs; "
        "the spread columns show median (min–max) over every job."
    )
    header = ["", "Spools", "Spools spread", "Open MPI", "Open MPI spread", "Spools ÷ Open MPI"]
    out.append(table(header, rows))
    return out


PROBES = (
    ("ring_floor_ns", None, "ring floor (ns)"),
    ("flag_pingpong_ns", None, "flag ping-pong (ns)"),
    ("memcpy_GBps", 64 * KIB, "memcpy 64 KiB (GB/s)"),
    ("memcpy_GBps", MIB, "memcpy 1 MiB (GB/s)"),
    ("memcpy_GBps", 16 * MIB, "memcpy 16 MiB (GB/s)"),
)


def probe_tables(results):
    out = ["### Raw probes of the Spools benchmarks, at start and end"]
    docs = [
        (program, doc)
        for _, program, doc in results.docs
        if isinstance(doc.get("probe"), dict) or isinstance(doc.get("probe_end"), dict)
    ]
    if not docs:
        return out + [f"Probes: {NOT_MEASURED}."]
    rows = []
    for name, size, title in PROBES:
        start = [probe(d, name, size) for _, d in docs]
        end = [probe(d, name, size, "probe_end") for _, d in docs]
        drift = [ratio(e, s) for s, e in zip(start, end)]
        drift = [x for x in drift if x is not None]
        start = [x for x in start if x is not None]
        end = [x for x in end if x is not None]
        rows.append(
            [
                title,
                fmt_or_not(median_or_none(start)),
                f"{fmt(min(start))}–{fmt(max(start))}" if start else MISSING,
                fmt_or_not(median_or_none(end)),
                f"{fmt(min(end))}–{fmt(max(end))}" if end else MISSING,
                fmt_ratio(median_or_none(drift)),
                f"{fmt_ratio(min(drift))}–{fmt_ratio(max(drift))}" if drift else MISSING,
            ]
        )
    out.append(
        "Every Spools benchmark measures the machine before and after itself: a bare "
        "single-producer ring (ring floor: one way, 40-byte message), a flag bounced through one "
        "cache line (one way), single-thread memcpy. Over all "
        f"{len(docs)} Spools documents: median and min–max at the start and at the end, and "
        "end ÷ start per document. The goals hold the ping-pong against the probe at its "
        "start; wide ranges here mean the host was noisy."
    )
    header = ["probe", "start", "start min–max", "end", "end min–max", "end ÷ start"]
    header.append("end ÷ start min–max")
    out.append(table(header, rows))

    by_program = defaultdict(list)
    for program, doc in docs:
        by_program[program].append(doc)
    rows = []
    for program in sorted(by_program):
        group = by_program[program]

        def values(name, size, which, group=group):
            found = (probe(d, name, size, which) for d in group)
            return [v for v in found if v is not None]

        rows.append(
            [
                program,
                str(len(group)),
                fmt_spread(values("ring_floor_ns", None, "probe")),
                fmt_spread(values("ring_floor_ns", None, "probe_end")),
                fmt_spread(values("memcpy_GBps", 64 * KIB, "probe")),
                fmt_spread(values("memcpy_GBps", 64 * KIB, "probe_end")),
            ]
        )
    out.append("Per benchmark, median (min–max) over its runs:")
    header = [
        "benchmark",
        "runs",
        "ring floor, start (ns)",
        "ring floor, end (ns)",
        "memcpy 64 KiB, start (GB/s)",
        "memcpy 64 KiB, end (GB/s)",
    ]
    out.append(table(header, rows))
    return out


# --- Messaging (the msg suite) ---------------------------------------------------------------

NA = "n/a"
COLL_OPS = ("barrier", "bcast", "allreduce", "alltoall")
AM_PATHS = {"short", "bulk"}
OVERLAP_MODES = (
    (False, "blocking", "blocking"),
    (False, "nonblocking", "nonblocking"),
    (True, "nonblocking", "nonblocking + progress thread"),
)


def na(cell):
    """A table cell with the msg section's mark for what is missing."""
    return NA if cell == MISSING else cell.replace(NOT_MEASURED, NA)


def fmt_na(value):
    return NA if value is None else fmt(value)


def fmt_seconds(value):
    """Seconds to three significant digits (communication times are small)."""
    if value is None:
        return NA
    return fmt(value) if abs(value) >= 1 else f"{value:.3g}"


def ratio_na(value):
    return NA if value is None else f"{value:.2f}"


def integer(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def msg_system(program, doc, kind):
    """'spools' or 'mpi' for a coll or matmul document: from its name (coll-spools-P4), or
    failing that from its impl field; None if neither says."""
    parts = program.split("-")
    if len(parts) > 1 and parts[0] == kind and parts[1] in ("spools", "mpi"):
        return parts[1]
    impl = doc.get("impl")
    return impl if impl in ("spools", "mpi") else None


def doc_int(doc, key, program, letter):
    """An integer field of a document, or failing that -LETTER<digits> in its name."""
    value = integer(doc.get(key))
    if value is not None:
        return value
    found = re.search(rf"-{letter}(\d+)(?:-|$)", program)
    return int(found.group(1)) if found else None


def run_medians(per):
    """{key: {run: [values]}} -> {key: median over the runs of each run's median}."""
    return {
        key: statistics.median(statistics.median(v) for v in runs.values())
        for key, runs in per.items()
        if runs
    }


def per_run(docs, value):
    """{run: value(doc)} over [(run, doc)] (several documents of one run: their median)."""
    found = defaultdict(list)
    for run, doc in docs:
        v = value(doc)
        if v is not None:
            found[run].append(v)
    return {run: statistics.median(v) for run, v in found.items()}


# Collectives.


def coll_medians(results):
    """{(system, op, ranks, bytes): median latency (µs) over the runs}."""
    per = defaultdict(lambda: defaultdict(list))
    for run, program, doc in results.msg:
        if doc.get("benchmark") != "coll":
            continue
        system = msg_system(program, doc, "coll")
        ranks = doc_int(doc, "ranks", program, "P")
        if system is None or ranks is None:
            warn(f"skipping a coll document of {program}: no impl or ranks")
            continue
        for series in doc.get("series") or []:
            if not isinstance(series, dict) or not isinstance(series.get("op"), str):
                continue
            for p in series.get("points") or []:
                if not isinstance(p, dict):
                    continue
                size, latency = integer(p.get("bytes")), number(p.get("latency_us"))
                if size is not None and size >= 0 and latency is not None and latency > 0:
                    per[(system, series["op"], ranks, size)][run].append(latency)
    return run_medians(per)


def op_order(op):
    return (COLL_OPS.index(op) if op in COLL_OPS else len(COLL_OPS), op)


def coll_tables(med):
    out = ["### Collectives: latency per call (µs)"]
    ops = sorted({op for _, op, _, _ in med}, key=op_order)
    if not ops:
        return out + [f"Collectives: {NA} (no coll measurements)."]
    out.append(
        "Per call, the slowest rank's mean over a batch of calls, median over the batches, then "
        "median over the runs. bcast: root 0; allreduce: sum of bytes/8 doubles; alltoall: "
        "bytes to every rank. Ratio columns are MPI ÷ Spools: **> 1 means Spools is faster**."
    )
    for op in ops:
        ranks = sorted({n for _, o, n, _ in med if o == op})
        sizes = sorted({b for _, o, _, b in med if o == op})
        header = ["size"]
        for n in ranks:
            header += [f"P={n} Spools", f"P={n} MPI", f"P={n} MPI ÷ Spools"]
        rows = []
        for size in sizes:
            row = [human_size(size) if op != "barrier" else "–"]
            for n in ranks:
                mine, theirs = med.get(("spools", op, n, size)), med.get(("mpi", op, n, size))
                row += [fmt_na(mine), fmt_na(theirs), ratio_na(ratio(theirs, mine))]
            rows.append(row)
        out += [f"**{op}** (µs)", table(header, rows)]
    return out


def coll_goal_rows(med):
    """Goal rows: allreduce and bcast at most MPI's latency at every point with 2 to 8 ranks."""
    rows = []
    for op in ("allreduce", "bcast"):
        points = sorted(
            (n, b)
            for system, o, n, b in med
            if system == "spools" and o == op and 2 <= n <= 8 and ("mpi", op, n, b) in med
        )
        ratios = [med[("spools", op, n, b)] / med[("mpi", op, n, b)] for n, b in points]
        passing = sum(r <= 1.0 for r in ratios)
        ranks = sorted({n for n, _ in points})
        if ratios:
            worst = max(range(len(points)), key=lambda k: ratios[k])
            n, b = points[worst]
            shown = (
                f"median {statistics.median(ratios):.2f}, worst {ratios[worst]:.2f} "
                f"(P={n}, {human_size(b)})"
            )
            measured = f"{passing}/{len(points)} points ≤ MPI"
            verdict = "**PASS**" if passing == len(points) else "**MISS**"
        else:
            shown, measured, verdict = NA, NA, NA
        rows.append(
            [
                f"{op} latency ÷ MPI, P=2..8, every size",
                measured,
                f"MPI {op}, P={','.join(map(str, ranks))}" if ranks else NA,
                shown,
                "≤ 1.00 at every point",
                f"{passing}/{len(points)} points" if points else NA,
                verdict,
            ]
        )
    return rows


# Matrix multiply.


def matmul_tables(results):
    out = ["### Matrix multiply, ring shift (seconds per multiply)"]
    per = defaultdict(lambda: defaultdict(list))
    comm = defaultdict(lambda: defaultdict(list))
    failed = defaultdict(int)
    for run, program, doc in results.msg:
        if doc.get("benchmark") != "matmul":
            continue
        system = msg_system(program, doc, "matmul")
        n, ranks = doc_int(doc, "n", program, "n"), doc_int(doc, "ranks", program, "P")
        if system is None or n is None or ranks is None:
            warn(f"skipping a matmul document of {program}: no impl, n or ranks")
            continue
        if doc.get("check") != "ok":
            failed[(system, n, ranks)] += 1
        seconds, comm_seconds = number(doc.get("seconds")), number(doc.get("comm_seconds"))
        if seconds is not None and seconds > 0:
            per[(system, n, ranks)][run].append(seconds)
        if comm_seconds is not None and comm_seconds >= 0:
            comm[(system, n, ranks)][run].append(comm_seconds)
    seconds, comm_seconds = run_medians(per), run_medians(comm)
    cases = sorted({(n, p) for _, n, p in list(per) + list(comm) + list(failed)})
    if not cases:
        return out + [f"Matrix multiply: {NA} (no matmul measurements)."]
    rows = []
    for n, p in cases:
        mine, theirs = seconds.get(("spools", n, p)), seconds.get(("mpi", n, p))
        flops = 2.0 * n**3 / 1e9
        row = [str(n), str(p), fmt_seconds(mine), fmt_seconds(theirs)]
        row += [fmt_seconds(comm_seconds.get(("spools", n, p)))]
        row += [fmt_seconds(comm_seconds.get(("mpi", n, p)))]
        row += [fmt_na(ratio(flops, mine)), fmt_na(ratio(flops, theirs))]
        row += [ratio_na(ratio(theirs, mine))]
        bad = [f"{s}: {failed[(s, n, p)]} not ok" for s in ("spools", "mpi") if failed[(s, n, p)]]
        row.append("; ".join(bad) or "ok")
        rows.append(row)
    out.append(
        "C = A·B of n×n doubles, columns distributed over P ranks, the A blocks shifted around "
        "the ring. Per multiply the slowest rank, median over the repetitions, then over the "
        "runs; comm: time in the shift. GFLOP/s = 2n³ ÷ time. MPI ÷ Spools: **> 1 means "
        "Spools is faster**. Check: the result check of every document (\"check\": \"ok\")."
    )
    header = ["n", "P", "Spools (s)", "MPI (s)", "Spools comm (s)", "MPI comm (s)"]
    header += ["Spools GFLOP/s", "MPI GFLOP/s", "MPI ÷ Spools", "check"]
    out.append(table(header, rows))
    return out


# Ping-pong through the tagged API.


def msg_pingpong_role(program, doc):
    """'tagged', 'am' or 'mpi' for a msg-pingpong document: from its name, else its fields."""
    name = program[len(MSG_PINGPONG) :] if program.startswith(MSG_PINGPONG) else ""
    if name in ("spools-tagged", "tagged"):
        return "tagged"
    if name in ("spools-am", "am"):
        return "am"
    if name.split("-")[0] == "mpi":
        return "mpi"
    paths = {s.get("path") for s in doc.get("series") or [] if isinstance(s, dict)}
    if "tagged" in paths:
        return "tagged"
    return "mpi" if doc.get("transport") == "mpi" else "am"


def pingpong_docs(results, role):
    """[(run, doc)] of the msg suite's ping-pongs of one role, and whether the core suite's
    documents stood in (for am and mpi, when the msg suite has none)."""
    docs = [
        (run, doc)
        for run, program, doc in results.msg
        if doc.get("benchmark") == "pingpong" and msg_pingpong_role(program, doc) == role
    ]
    stand_in = {"am": "spools-shm", "mpi": "mpi-default"}.get(role)
    if docs or stand_in is None:
        return docs, False
    docs = [
        (run, doc)
        for run, program, doc in results.docs
        if doc.get("benchmark") == "pingpong" and doc_label(program, doc) == stand_in
    ]
    return docs, bool(docs)


def tagged_paths(doc):
    """The tagged series of a tagged ping-pong document (all its series if none is named so)."""
    paths = {s.get("path") for s in doc.get("series") or [] if isinstance(s, dict)}
    return {"tagged"} if "tagged" in paths else None


def pingpong_medians(docs, field, paths):
    """{bytes: (median over runs, path)} of the best of the given paths (None: every path)
    in each run; the path is the one that was best in most runs."""
    per = defaultdict(lambda: defaultdict(list))
    for run, doc in docs:
        wanted = paths(doc) if callable(paths) else paths
        for series in doc.get("series") or []:
            if not isinstance(series, dict):
                continue
            if wanted is not None and series.get("path") not in wanted:
                continue
            for p in series.get("points") or []:
                if not isinstance(p, dict):
                    continue
                size, value = integer(p.get("bytes")), number(p.get(field))
                if size is not None and size > 0 and value is not None and value > 0:
                    per[size][run].append((value, str(series.get("path", "?"))))
    pick = min if field == "latency_us" else max
    out = {}
    for size, runs in per.items():
        best = [pick(values, key=lambda v: v[0]) for values in runs.values()]
        paths_won = [path for _, path in best]
        out[size] = (
            statistics.median(v for v, _ in best),
            max(set(paths_won), key=paths_won.count),
        )
    return out


def pingpong_msg_tables(results):
    out = ["### Ping-pong through the tagged API, 2 ranks over shared memory"]
    tagged, _ = pingpong_docs(results, "tagged")
    am, am_core = pingpong_docs(results, "am")
    mpi, mpi_core = pingpong_docs(results, "mpi")
    if not (tagged or am or mpi):
        return out + [f"Tagged ping-pong: {NA} (no ping-pong documents of the msg suite)."]
    lat = {
        "tagged": pingpong_medians(tagged, "latency_us", tagged_paths),
        "am": pingpong_medians(am, "latency_us", AM_PATHS),
        "mpi": pingpong_medians(mpi, "latency_us", None),
    }
    sizes = sorted(set().union(*(set(v) for v in lat.values())))
    if not sizes:
        return out + [f"Tagged ping-pong: {NA} (no latency measurements)."]
    rows = []
    for size in sizes:
        t, a, m = (lat[k].get(size, (None, None))[0] for k in ("tagged", "am", "mpi"))
        am_path = lat["am"].get(size, (None, None))[1]
        rows.append(
            [
                human_size(size),
                fmt_na(t),
                NA if a is None else f"{fmt(a)} ({am_path})",
                fmt_na(m),
                ratio_na(ratio(t, a)),
                ratio_na(ratio(t, m)),
            ]
        )
    notes = []
    if am_core:
        notes.append("active messages from the core suite's pingpong-spools-shm")
    if mpi_core:
        notes.append("MPI from the core suite's pingpong-mpi-default")
    out.append(
        "One-way latency (µs), median over the runs. AM: the active-message ping-pong (`spools "
        "bench pingpong`), the better of its short and bulk paths (n/a above the bulk limit). "
        "Ratio columns are tagged ÷ the other: **< 1 means the tagged API is faster**."
        + (f" ({'; '.join(notes)}.)" if notes else "")
    )
    header = ["size", "tagged (µs)", "AM (µs)", "MPI (µs)", "tagged ÷ AM", "tagged ÷ MPI"]
    out.append(table(header, rows))
    size = 16 * MIB
    bw = {
        "tagged": pingpong_medians(tagged, "bandwidth_MBps", tagged_paths).get(size),
        "am": pingpong_medians(am, "bandwidth_MBps", AM_PATHS).get(size),
        "memory": pingpong_medians(am, "bandwidth_MBps", {"memory"}).get(size),
        "mpi": pingpong_medians(mpi, "bandwidth_MBps", None).get(size),
    }
    bw = {k: (v[0] if v else None) for k, v in bw.items()}
    out.append(f"Bandwidth at {human_size(size)} (MB/s, 10^6 B/s), median over the runs:")
    out.append(
        table(
            ["size", "tagged", "AM", "memory (put)", "MPI", "tagged ÷ MPI"],
            [
                [human_size(size)]
                + [fmt_na(bw[k]) for k in ("tagged", "am", "memory", "mpi")]
                + [ratio_na(ratio(bw["tagged"], bw["mpi"]))]
            ],
        )
    )
    return out


def pingpong_goals(results):
    tagged, _ = pingpong_docs(results, "tagged")
    am, _ = pingpong_docs(results, "am")
    mpi, _ = pingpong_docs(results, "mpi")
    tagged8 = per_run(tagged, lambda d: point(d, "latency_us", 8, tagged_paths(d)))
    am8 = per_run(am, lambda d: point(d, "latency_us", 8, AM_PATHS))
    mpi8 = per_run(mpi, lambda d: point(d, "latency_us", 8))

    def bandwidth(docs, paths):
        def value(doc):
            wanted = paths(doc) if callable(paths) else paths
            return point(doc, "bandwidth_MBps", 16 * MIB, wanted, max)

        return per_run(docs, value)

    return [
        Goal(
            "tagged latency 8 B ÷ active messages 8 B",
            tagged8, "µs", "ratio<=", 1.3, "≤ 1.30", am8, "AM 8 B",
        ),
        Goal(
            "tagged latency 8 B ÷ MPI 8 B",
            tagged8, "µs", "ratio<=", 1.0, "≤ 1.00", mpi8, "MPI 8 B",
        ),
        Goal(
            "tagged bandwidth 16 MiB ÷ MPI 16 MiB",
            bandwidth(tagged, tagged_paths), "MB/s", "ratio>=", 1.0, "≥ 1.00",
            bandwidth(mpi, None), "MPI 16 MiB",
        ),
    ]


# Overlap of communication and computation.


def overlap_docs(results):
    """[(run, progress thread?, doc)] of the overlap documents."""
    out = []
    for run, program, doc in results.msg:
        if doc.get("benchmark") != "overlap":
            continue
        thread = doc.get("progress_thread")
        if not isinstance(thread, bool):
            thread = program.endswith("-thread")
        out.append((run, thread, doc))
    return out


def overlap_points(doc, mode, size):
    """{compute_ms: total_ms} of one series of an overlap document."""
    out = {}
    for series in doc.get("series") or []:
        if not isinstance(series, dict) or series.get("mode") != mode:
            continue
        if integer(series.get("bytes")) != size:
            continue
        for p in series.get("points") or []:
            if not isinstance(p, dict):
                continue
            compute, total = number(p.get("compute_ms")), number(p.get("total_ms"))
            if compute is not None and compute >= 0 and total is not None and total > 0:
                out[compute] = total
    return out


def overlap_tables(results):
    out = ["### Overlap of a transfer with computation, 2 ranks"]
    docs = overlap_docs(results)
    if not docs:
        return out + [f"Overlap: {NA} (no overlap documents)."]
    sizes = sorted(
        {
            integer(s.get("bytes"))
            for _, _, d in docs
            for s in d.get("series") or []
            if isinstance(s, dict) and integer(s.get("bytes")) is not None
        }
    )
    out.append(
        "Total time (ms) of a transfer of the given size and a computation of compute_ms, "
        "median over the runs: blocking (transfer, then compute), nonblocking (start the "
        "transfer, compute, wait) without and with the progress thread "
        "(SPOOLS_PROGRESS_THREAD=1). Full overlap: total ≈ compute (last column ≈ 1.00)."
    )
    for size in sizes:
        per = defaultdict(lambda: defaultdict(list))
        for run, thread, doc in docs:
            for want_thread, mode, _ in OVERLAP_MODES:
                if thread == want_thread:
                    for compute, total in overlap_points(doc, mode, size).items():
                        per[(want_thread, mode, compute)][run].append(total)
        med = run_medians(per)
        computes = sorted({c for _, _, c in med})
        rows = []
        for compute in computes:
            cells = [med.get((t, m, compute)) for t, m, _ in OVERLAP_MODES]
            with_thread = cells[-1]
            rows.append(
                [f"{compute:g}"]
                + [fmt_na(c) for c in cells]
                + [ratio_na(ratio(with_thread, compute) if compute > 0 else None)]
            )
        header = ["compute (ms)"] + [f"{title} (ms)" for _, _, title in OVERLAP_MODES]
        header.append("thread: total ÷ compute")
        out += [f"**{human_size(size)}**", table(header, rows)]

    def break_even(thread, size):
        values = per_run(
            [(run, doc) for run, t, doc in docs if t == thread],
            lambda d: number((d.get("break_even_ms") or {}).get(str(size)))
            if isinstance(d.get("break_even_ms"), dict)
            else None,
        )
        return median_of(values)

    rows = [
        [human_size(size), fmt_na(break_even(False, size)), fmt_na(break_even(True, size))]
        for size in sizes
    ]
    out.append(
        "Break-even computation (ms) as each document reports it, median over the runs "
        "(n/a: not reached or not measured):"
    )
    out.append(table(["size", "no thread", "progress thread"], rows))
    return out


def overlap_goal(results):
    """With the progress thread, a 16 MiB transfer overlapped with the longest computation."""
    total, compute = {}, {}
    for run, thread, doc in overlap_docs(results):
        if not thread:
            continue
        points = overlap_points(doc, "nonblocking", 16 * MIB)
        longest = max(points, default=None)
        if longest:
            total.setdefault(run, []).append(points[longest])
            compute.setdefault(run, []).append(longest)
    med = statistics.median
    return Goal(
        "progress thread: 16 MiB nonblocking, total ÷ compute at the longest computation",
        {r: med(v) for r, v in total.items()}, "ms", "ratio<=", 1.1, "≤ 1.10",
        {r: med(v) for r, v in compute.items()}, "compute_ms",
    )


def messaging_section(results):
    runs = sorted({run for run, _, _ in results.msg})
    out = [f"## Messaging ({len(runs)} run(s) of the msg suite, medians)"]
    coll = coll_medians(results)
    rows = [[na(cell) for cell in goal.row()] for goal in pingpong_goals(results)]
    rows.append([na(cell) for cell in overlap_goal(results).row()])
    rows += coll_goal_rows(coll)
    header = ["goal", "measured", "reference (same run)", "ratio", "target", "runs passing"]
    header.append("result")
    out += [
        "### Messaging goals",
        "Measured: median over the runs; ratio: median over the runs of measured ÷ reference "
        "of the same run, and the verdict goes by it. The collective rows compare the medians "
        "of every (ranks, size) point measured by both and pass if all points do.",
        table(header, rows),
    ]
    out += coll_tables(coll)
    out += matmul_tables(results)
    out += pingpong_msg_tables(results)
    out += overlap_tables(results)
    return out


def repo_relative(path):
    """`path` relative to the working directory when it lies below it (results must not name
    paths outside the repository), else as it is."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return Path(path)


# --- Plots -----------------------------------------------------------------------------------

SPOOLS_COLOURS = ["#1f3b99", "#17a2b8", "#6f42c1", "#4ea8de", "#2e8b57", "#9bbb3b"]
MPI_COLOURS = ["#d62828", "#f77f00", "#8c564b", "#e76f51", "#b5179e", "#9d0208"]


def log_ticks(low, high, base):
    """Integer exponents e with low <= base**e <= high, after widening to whole powers."""
    first = math.floor(math.log(low, base) + 1e-9)
    last = math.ceil(math.log(high, base) - 1e-9)
    if first == last:
        first, last = first - 1, last + 1
    return first, last


def y_label(value):
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def svg_plot(path, title, y_title, lines, subtitle):
    """Write a log-log line plot. lines: [(name, {x: y}, Style)]."""
    width, height = 980, 600
    left, top, right, bottom = 90, 70, 260, 70
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for _, pts, _ in lines for x in pts]
    ys = [y for _, pts, _ in lines for y in pts.values()]
    x_lo, x_hi = log_ticks(min(xs), max(xs), 2)
    y_lo, y_hi = log_ticks(min(ys), max(ys), 10)

    def px(x):
        return left + (math.log2(x) - x_lo) / (x_hi - x_lo) * plot_w

    def py(y):
        return top + plot_h - (math.log10(y) - y_lo) / (y_hi - y_lo) * plot_h

    esc = html.escape

    def vline(x, colour):
        return f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="{colour}"/>'

    def hline(y, colour):
        right_end = left + plot_w
        return f'<line x1="{left}" y1="{y:.1f}" x2="{right_end}" y2="{y:.1f}" stroke="{colour}"/>'

    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{esc(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left + plot_w / 2}" y="28" text-anchor="middle" font-size="17" '
        f'font-weight="bold">{esc(title)}</text>',
        f'<text x="{left + plot_w / 2}" y="48" text-anchor="middle" fill="#555">'
        f"{esc(subtitle)}</text>",
    ]

    # Grid and ticks: every power of 2 on x (labels on a stride that keeps them apart),
    # every decade on y (with 2..9 multiples as faint lines).
    stride = next(s for s in (1, 2, 4, 8, 16) if (x_hi - x_lo) / s <= 8)
    for e in range(x_lo, x_hi + 1):
        x = px(2**e)
        labelled = e % stride == 0
        colour = "#c8c8c8" if labelled else "#ececec"
        svg.append(vline(x, colour))
        if labelled:
            svg.append(
                f'<text x="{x:.1f}" y="{top + plot_h + 18}" text-anchor="middle">'
                f"{esc(human_size(2**e))}</text>"
            )
    for e in range(y_lo, y_hi + 1):
        y = py(10**e)
        svg.append(hline(y, "#c8c8c8"))
        svg.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{y_label(10**e)}</text>'
        )
        if e < y_hi:
            svg += [hline(py(k * 10**e), "#f0f0f0") for k in range(2, 10)]
    svg.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>'
    )
    svg.append(
        f'<text x="{left + plot_w / 2}" y="{height - 22}" text-anchor="middle" font-size="14">'
        "message size (bytes, log scale)</text>"
    )
    svg.append(
        f'<text transform="translate(24 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" '
        f'font-size="14">{esc(y_title)}</text>'
    )

    # One polyline with markers per series (a lone point gets its marker only).
    for name, pts, style in lines:
        coords = [(px(x), py(pts[x])) for x in sorted(pts)]
        if len(coords) > 1:
            points = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            svg.append(
                f'<polyline points="{points}" fill="none" {style.stroke()}>'
                f"<title>{esc(name)}</title></polyline>"
            )
        svg += [style.marker(x, y) for x, y in coords]

    # Legend to the right of the plot.
    lx, ly = left + plot_w + 20, top + 10
    svg.append(f'<text x="{lx}" y="{ly}" font-weight="bold">series</text>')
    for i, (name, _, style) in enumerate(lines):
        y = ly + 22 * (i + 1)
        svg.append(f'<line x1="{lx}" y1="{y - 4}" x2="{lx + 34}" y2="{y - 4}" {style.stroke()}/>')
        svg.append(style.marker(lx + 17, y - 4))
        svg.append(f'<text x="{lx + 42}" y="{y}">{esc(name)}</text>')

    svg.append("</svg>")
    path.write_text("\n".join(svg) + "\n", encoding="utf-8")


class Style:
    """How a series is drawn: MPI dashed with squares, Spools solid with circles; the markers
    of TCP series are hollow."""

    def __init__(self, colour, mpi, hollow):
        self.colour, self.mpi, self.hollow = colour, mpi, hollow

    def stroke(self):
        dash = ' stroke-dasharray="7 4"' if self.mpi else ""
        return f'stroke="{self.colour}" stroke-width="2"{dash}'

    def marker(self, x, y):
        fill = "white" if self.hollow else self.colour
        paint = f'fill="{fill}" stroke="{self.colour}" stroke-width="1.5"'
        if self.mpi:
            return f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" {paint}/>'
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" {paint}/>'


def write_plots(directory, series, runs):
    spools = [s for s in series if not s.mpi]
    mpi = [s for s in series if s.mpi]
    styled = [
        (s, Style(SPOOLS_COLOURS[i % len(SPOOLS_COLOURS)], False, medium(s.label) == "tcp"))
        for i, s in enumerate(spools)
    ]
    styled += [
        (s, Style(MPI_COLOURS[i % len(MPI_COLOURS)], True, medium(s.label) == "tcp"))
        for i, s in enumerate(mpi)
    ]
    subtitle = (
        f"median of {runs} run(s); Spools solid with circles, MPI dashed with squares, "
        "hollow markers over TCP"
    )
    written = []
    for metric, file_name, title, y_title in (
        ("lat", "latency.svg", "Ping-pong latency, one way", "latency (µs, log scale)"),
        ("bw", "bandwidth.svg", "Ping-pong bandwidth", "bandwidth (MB/s, log scale)"),
    ):
        lines = [(s.name, getattr(s, metric), style) for s, style in styled if getattr(s, metric)]
        if lines:
            svg_plot(directory / file_name, title, y_title, lines, subtitle)
            written.append(file_name)
    return written


# --- Main ------------------------------------------------------------------------------------


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    directory = Path(argv[1] if len(argv) == 2 else "target/bench-peers")
    if not directory.is_dir():
        warn(f"{directory} is not a directory")
        return 1
    results = load(directory)
    if results.documents == 0:
        warn(f"no benchmark documents in {directory}")
        return 1

    series = build_series(results)
    runs = len(results.runs) or 1
    out = [f"## Spools vs Open MPI peer benchmarks ({runs} run(s), medians)"]
    host = directory / "host.txt"
    if host.is_file():
        out.append("```text\n" + host.read_text(encoding="utf-8").strip() + "\n```")
    if results.docs:
        out += goals_table(results)
        out += pingpong_tables(series, "shm")
        out += pingpong_tables(series, "tcp")
        out += logp_table(results)
        out += rate_table(results)
        out += ring_table(results)
        out += startup_table(results)
        out += raw_tables(results, series)
        out += probe_tables(results)
        out += spread_table(results, series)
    written = write_plots(directory, series, runs) if series else []
    if written:
        out.append("Plots: " + ", ".join(str(repo_relative(directory / name)) for name in written))
    if results.msg:
        out += messaging_section(results)
    print("\n\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
