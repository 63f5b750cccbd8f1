#!/usr/bin/env python3
"""mpi4py's test suite per module on Spools and on MPICH: the table of docs/mpi.md.

Runs every module of the mpi4py 4.1.2 sdist's test/ (unpacked by scripts/test-mpi4py.sh
into target/mpi4py-4.1.2/test) with 1, 2 and 3 ranks, once on Spools (`spools run`,
with the skips of crates/spools-mpi/tests/mpi4py-skip.txt, as the test command runs it)
and once on MPICH's libmpi_abi.so.1 from PyPI's mpich wheel (its own `mpiexec`, no
skips), and prints a Markdown table: tests run, skipped, failed (failures + errors) per
module, rank count and implementation. A module that Spools' skip file leaves out shows
its reason. Not a test: a report (about 20 minutes on 2 cores).

    python3 scripts/mpi4py-table.py [--ranks 1,2,3] [--out FILE] [--timeout SECS]
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "target" / "mpi4py-4.1.2" / "test"
VENV = ROOT / "target" / "mpi-venv"
SKIP = ROOT / "crates" / "spools-mpi" / "tests" / "mpi4py-skip.txt"


def skips():
    """(module regexes with reasons, test patterns) of the skip file."""
    modules, tests = [], []
    for line in SKIP.read_text().splitlines():
        body, _, reason = line.partition("#")
        parts = body.split(None, 1)
        if len(parts) != 2:
            continue
        kind, pattern = parts[0], parts[1].strip()
        if kind == "module":
            modules.append((re.compile(pattern), reason.strip()))
        elif kind == "test":
            tests.append(pattern)
    return modules, tests


def parse(out):
    """(run, skipped, failed) from the first rank's unittest summary, or None."""
    ran = re.search(r"^Ran (\d+) tests?", out, re.M)
    if not ran:
        return None
    verdict = re.search(r"^(OK|FAILED)\b.*$", out[ran.end():], re.M)
    line = verdict.group(0) if verdict else "FAILED (errors=1)"
    skipped = re.search(r"skipped=(\d+)", line)
    fails = sum(int(x) for x in re.findall(r"(?:failures|errors)=(\d+)", line))
    return int(ran.group(1)), int(skipped.group(1)) if skipped else 0, fails


def run(impl, n, module, excludes, timeout):
    args = [str(VENV / "bin" / "python"), "main.py", "-q", "-i", r"^%s\.py$" % re.escape(module)]
    env = dict(os.environ)
    if impl == "spools":
        for p in excludes:
            args += ["-x", p]
        cmd = [str(ROOT / "target" / "debug" / "spools"), "run", "-n", str(n),
               "--timeout", str(timeout), "--"] + args
    else:
        env["LD_LIBRARY_PATH"] = str(VENV / "lib")
        cmd = [str(VENV / "bin" / "mpiexec"), "-n", str(n)] + args
    try:
        p = subprocess.run(cmd, cwd=TESTS, env=env, capture_output=True, text=True,
                           timeout=timeout + 30, start_new_session=True)
    except subprocess.TimeoutExpired:
        return "timeout"
    r = parse(p.stdout + p.stderr)
    if r is None:
        return "exit %d" % p.returncode
    return "%d/%d/%d" % r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1,2,3")
    ap.add_argument("--out", default=str(ROOT / "target" / "mpi4py-table.md"))
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    if not TESTS.is_dir():
        sys.exit("mpi4py-table: run scripts/test-mpi4py.sh first (it unpacks the tests)")
    ranks = [int(x) for x in a.ranks.split(",")]
    mods, excludes = skips()
    modules = sorted(p.stem for p in TESTS.glob("test_*.py"))
    head = ["module"] + ["%s %d" % (impl, n) for n in ranks for impl in ("Spools", "MPICH")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in modules:
        reason = next((r for rx, r in mods if rx.search(m + ".py")), None)
        cells = [m]
        for n in ranks:
            cells.append("not run: " + reason if reason else run("spools", n, m, excludes, a.timeout))
            cells.append(run("mpich", n, m, [], a.timeout))
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    text = ("Cells: tests run / skipped / failed (failures + errors), first rank's count.\n\n"
            + "\n".join(lines) + "\n")
    Path(a.out).write_text(text)
    print("written to", a.out)


if __name__ == "__main__":
    main()
