#!/usr/bin/env python3
"""Summarize the peer benchmarks written by bench/peers/run.sh.

Usage: summarize.py [DIR]   (default: target/bench-peers)

Reads every JSON document in DIR, takes medians over the runs per (program, path, size), and
prints Markdown tables on stdout: ping-pong latency and bandwidth of Spools and Open MPI side
by side (shared memory, then TCP), the token-ring hop times, and the raw limits of the host.
Also writes DIR/latency.svg and DIR/bandwidth.svg (log-log, one line per series).

Documents are named PROGRAM.runI.json. For ping-pong, PROGRAM is "pingpong-LABEL" and LABEL
("spools-shm", "mpi-default", "mpi-tuned", "mpi-tcp", ...) names the series; the ring and raw
documents are recognised by their "benchmark" field. Python standard library only.
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
        self.probes = defaultdict(lambda: defaultdict(list))  # probes[label][name] = [...]
        self.ring = defaultdict(lambda: defaultdict(list))  # ring[system][ranks] = [hop_us]
        self.ring_rounds = defaultdict(set)  # ring_rounds[system] = {rounds}
        self.raw = defaultdict(list)  # raw[key] = [...]
        self.memcpy = defaultdict(list)  # memcpy[bytes] = [GB/s]
        self.runs = set()
        self.documents = 0


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
        if match:
            results.runs.add(int(match.group("run")))
        results.documents += 1
        kind = doc["benchmark"]
        if kind == "pingpong":
            load_pingpong(results, program, doc)
        elif kind == "ring":
            load_ring(results, program, doc)
        elif kind == "raw":
            load_raw(results, doc)
        else:
            warn(f"skipping {path.name}: unknown benchmark {kind!r}")
    return results


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
    for name, value in (doc.get("probe") or {}).items():
        if number(value) is not None:
            results.probes[label][name].append(number(value))


def load_ring(results, program, doc):
    system = default_label(doc)
    ranks = doc.get("ranks")
    if not isinstance(ranks, int):
        found = re.search(r"-n(\d+)$", program)
        ranks = int(found.group(1)) if found else None
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
    for label in sorted(results.probes, key=label_order):
        for name, values in sorted(results.probes[label].items()):
            name = f"{display(label)} probe: {name}"
            rows.append([name, MISSING, fmt(statistics.median(values)), MISSING])
    if rows:
        out.append("### Raw limits of the host")
        out.append(
            "Raw: the raw probe (plain sockets and pipes between two processes, no library). "
            "TCP ping-pong busy-polls non-blocking sockets with TCP_NODELAY. "
            "The Spools column takes the best TCP path."
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
    out += pingpong_tables(series, "shm")
    out += pingpong_tables(series, "tcp")
    out += ring_table(results)
    out += raw_tables(results, series)
    out += spread_table(results, series)
    written = write_plots(directory, series, runs) if series else []
    if written:
        out.append("Plots: " + ", ".join(str(directory / name) for name in written))
    print("\n\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
