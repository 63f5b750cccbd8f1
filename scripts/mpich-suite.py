#!/usr/bin/env python3
"""MPICH's own test suite (`test/mpi`) run as MTest means it, on Spools or on MPICH.

Reads each directory's `testlist` (as MPICH's configure wrote it: `NAME NP [key=value...]`,
`#` comments) in a configured and built copy of the suite, runs every entry once with its
process count under a launcher, and counts it as passed when it exits 0 and prints the
line ` No Errors` (MTest's convention) within its time limit. Stdlib only.

    mpich-suite.py run --build DIR --src DIR --dirs coll,pt2pt --launcher spools --spools BIN --out F
    mpich-suite.py run --build DIR --src DIR --dirs coll --launcher mpich --mpiexec BIN --out F
    mpich-suite.py check --results F --known FILE     # exit 1 on a change against the list
    mpich-suite.py table --spools F --mpich F --known FILE

An entry's key is `DIR/NAME NP` and its arguments. Entries that differ only in `env=`
settings of MPICH's own control variables (`MPIR_CVAR_*`, which tune MPICH's transports)
run once, without them. The known list holds one key per line, a tab, and why the test
does not pass on Spools; `check` fails when a test off the list does not pass or a listed
test passes, so the list only shrinks. Listed entries whose reason begins with "slow" are
left out of a run given the list, unless `--run-slow`.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Entry:
    """One line of a testlist: a program, its process count and its arguments."""

    dir: str
    name: str
    np: int
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    time_limit: int | None = None
    # MTest's other verdicts: `TestStatus` and `TestErrFatal` pass on a nonzero exit,
    # `TestStatusNoErrors` on a nonzero exit that printed No Errors.
    result_test: str | None = None

    @property
    def key(self) -> str:
        return " ".join([f"{self.dir}/{self.name}", str(self.np), *self.args])


def parse_testlist(dir_name: str, text: str) -> list[Entry]:
    """The entries of one directory's testlist, deduplicated by key."""
    out: list[Entry] = []
    seen: set[str] = set()
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) < 2 or not words[1].isdigit():
            # A subdirectory line (the top-level list) or a malformed one.
            continue
        e = Entry(dir_name, words[0], int(words[1]))
        for w in words[2:]:
            k, _, v = w.partition("=")
            if k == "arg":
                e.args.append(v)
            elif k == "env":
                ek, _, ev = v.partition("=")
                if not ek.startswith("MPIR_CVAR_"):
                    e.env[ek] = ev
            elif k == "timeLimit" and v.isdigit():
                e.time_limit = int(v)
            elif k == "resultTest":
                e.result_test = v
        if e.key in seen:
            continue
        seen.add(e.key)
        out.append(e)
    return out


def entries(build: Path, src: Path, dirs: list[str]) -> list[Entry]:
    """Every entry of the listed directories, in testlist order: configure writes the
    lists made from a `testlist.in`; the others are the source's own."""
    out: list[Entry] = []
    for d in dirs:
        tl = build / d / "testlist"
        if not tl.is_file():
            tl = src / d / "testlist"
        if not tl.is_file():
            sys.exit(f"mpich-suite: no testlist for {d} in {build} or {src}")
        text = tl.read_text()
        out.extend(parse_testlist(d, text))
        # A line of one word naming a directory (errors/ and impls/ list their
        # subdirectories so): that directory's entries, as `errors/coll/...`.
        for raw in text.splitlines():
            words = raw.split("#", 1)[0].split()
            if len(words) == 1 and not words[0].startswith("@") and (build / d / words[0]).is_dir():
                out.extend(entries(build, src, [f"{d}/{words[0]}"]))
    return out


NO_ERRORS = re.compile(r"^\s*No [Ee]rrors\s*$")


def run_one(e: Entry, build: Path, argv: list[str], env: dict[str, str], limit: float):
    """Runs one entry; returns (status, seconds, a line of what went wrong).

    The launcher ends the job at `limit` seconds (`spools run --timeout`, MPICH's
    `MPIEXEC_TIMEOUT`, as MPICH's runtests does); this process kills it 30 s later if
    it did not."""
    wd = build / e.dir
    prog = wd / e.name
    if not os.access(prog, os.X_OK):
        return "nobuild", 0.0, "the program was not built"
    # The launcher's words, with {NP} and {LIMIT} filled in, then the program.
    cmd = [c.replace("{LIMIT}", str(int(limit))).replace("{NP}", str(e.np)) for c in argv]
    cmd += [f"./{e.name}", *e.args]
    env = {**env, "MPIEXEC_TIMEOUT": str(int(limit))}
    t0 = time.monotonic()
    p = subprocess.Popen(
        cmd,
        cwd=wd,
        env={**env, **e.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = p.communicate(timeout=limit + 30)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
        # The launcher first (for Spools: it stops its ranks and removes what the job
        # left in /dev/shm), then, after at most 20 s, the whole group.
        os.kill(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            out = b""
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if p.returncode is None:
            out, _ = p.communicate()
    secs = time.monotonic() - t0
    text = out.decode(errors="replace")
    lines = [ln.rstrip() for ln in text.splitlines()]
    if hung:
        return "hang", secs, f"no end within {limit + 30:.0f} s"
    said_ok = any(NO_ERRORS.match(ln) for ln in lines)
    if e.result_test in ("TestStatus", "TestErrFatal"):
        ok = p.returncode != 0
    elif e.result_test == "TestStatusNoErrors":
        ok = p.returncode != 0 and said_ok
    else:
        ok = p.returncode == 0 and said_ok
    # Stopped by the launcher at the limit: a hang, but for the entries whose verdict is
    # a nonzero exit (as MPICH's runtests judges them: init/timeout tests the launcher's
    # limit itself).
    if ok:
        return "pass", secs, ""
    if secs >= limit:
        return "hang", secs, f"stopped by the launcher after {limit:.0f} s"
    why = next((ln.strip() for ln in lines if ln.strip() and not NO_ERRORS.match(ln)), "")
    return "fail", secs, f"exit {p.returncode}: {why}"[:200]


def cmd_run(a: argparse.Namespace) -> int:
    build = Path(a.build).resolve()
    todo = entries(build, Path(a.src).resolve(), a.dirs.split(","))
    if a.only:
        todo = [e for e in todo if any(s in e.key for s in a.only.split(","))]
    env = dict(os.environ)
    if a.launcher == "spools":
        argv = [a.spools, "run", "--timeout", "{LIMIT}", "-n", "{NP}", "--"]
    else:
        # MPICH's own library: the programs' RUNPATH names the wheel's; nothing of
        # Spools' may come first.
        env.pop("LD_LIBRARY_PATH", None)
        argv = [a.mpiexec, "-n", "{NP}"]
    # Entries the known list calls slow are left out unless asked for.
    slow = set()
    if a.known and not a.run_slow:
        slow = {k for k, why in read_known(a.known).items() if why.startswith("slow")}
    t_all = time.monotonic()
    results: list[tuple[str, str, str, str] | None] = [None] * len(todo)
    pending = []
    for i, e in enumerate(todo):
        if e.key in slow:
            results[i] = (e.key, "skipped", "0.00", "slow: on the known list")
        else:
            pending.append(i)
    # `--jobs` entries at once, never two of one directory: the entries of a directory
    # share its working directory, and some write files of fixed names there (io/). A
    # lane takes the first pending entry whose directory no other lane is in.
    lock = threading.Lock()
    busy: set[str] = set()
    freed = threading.Condition(lock)

    def take() -> int | None:
        with lock:
            while pending:
                j = next((j for j in pending if todo[j].dir not in busy), None)
                if j is not None:
                    pending.remove(j)
                    busy.add(todo[j].dir)
                    return j
                freed.wait()
            return None

    def lane() -> None:
        while (i := take()) is not None:
            e = todo[i]
            # The entry's own limit (`timeLimit=` in its testlist, as MPICH's runtests
            # takes it), else the default.
            limit = float(e.time_limit or a.timeout)
            try:
                status, secs, why = run_one(e, build, argv, env, limit)
            finally:
                with lock:
                    busy.discard(e.dir)
                    freed.notify_all()
            results[i] = (e.key, status, f"{secs:.2f}", why)
            if a.verbose or status != "pass":
                print(f"[{i + 1}/{len(todo)}] {status:7} {secs:6.2f}s {e.key} {why}", flush=True)

    lanes = [threading.Thread(target=lane) for _ in range(max(1, a.jobs))]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    rows = [r for r in results if r is not None]
    if len(rows) != len(todo):
        print("mpich-suite: a lane ended early; not every entry ran", file=sys.stderr)
        return 1
    Path(a.out).write_text("".join("\t".join(r) + "\n" for r in rows))
    n_pass = sum(1 for r in rows if r[1] == "pass")
    print(
        f"mpich-suite: {a.launcher}: {len(rows)} entries, {n_pass} pass, "
        f"{sum(1 for r in rows if r[1] == 'fail')} fail, "
        f"{sum(1 for r in rows if r[1] == 'hang')} hang, "
        f"{sum(1 for r in rows if r[1] == 'nobuild')} not built, "
        f"{sum(1 for r in rows if r[1] == 'skipped')} slow ones skipped, "
        f"{time.monotonic() - t_all:.0f} s"
    )
    return 0


def read_results(path: str) -> dict[str, tuple[str, str]]:
    out = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            out[parts[0]] = (parts[1], parts[3] if len(parts) > 3 else "")
    return out


def read_known(path: str) -> dict[str, str]:
    """The known list: `KEY<TAB>reason` per line, `#` lines are comments."""
    out = {}
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        key, tab, why = line.partition("\t")
        if not tab or not why.strip():
            sys.exit(f"{path}:{n}: want 'KEY<TAB>reason', got {line!r}")
        out[key.strip()] = why.strip()
    return out


def cmd_check(a: argparse.Namespace) -> int:
    res = read_results(a.results)
    known = read_known(a.known)
    bad = 0
    for key, (status, why) in res.items():
        if status == "skipped":
            continue
        if status != "pass" and key not in known:
            print(f"FAILS, not on the known list: {key} ({status}: {why})")
            bad += 1
        elif status == "pass" and key in known and known[key].startswith("slow"):
            # Listed as slow (left out of the test command), not as failing.
            print(f"passes (listed as slow): {key}")
        elif status == "pass" and key in known:
            print(f"PASSES, but on the known list (take it off): {key}")
            bad += 1
    ran = sum(1 for k in known if k in res)
    print(
        f"mpich-suite: {len(res)} entries run, "
        f"{sum(1 for s, _ in res.values() if s == 'pass')} pass, "
        f"{ran} on the known list, {bad} changed"
    )
    return 1 if bad else 0


def cmd_table(a: argparse.Namespace) -> int:
    sp = read_results(a.spools)
    mp = read_results(a.mpich)
    known = read_known(a.known) if a.known else {}
    dirs: dict[str, list[int]] = {}
    only_mpich = []
    for key, (ms, _) in mp.items():
        d = key.split("/", 1)[0]
        row = dirs.setdefault(d, [0, 0, 0, 0])
        ss = sp.get(key, ("missing", ""))[0]
        row[0] += 1
        row[1] += ms == "pass"
        row[2] += ss == "pass"
        row[3] += key in known
        if ms == "pass" and ss != "pass":
            only_mpich.append((key, ss, known.get(key, sp.get(key, ("", ""))[1])))
    print("| directory | entries | pass on MPICH | pass on Spools | on the known list |")
    print("|---|---|---|---|---|")
    tot = [0, 0, 0, 0]
    for d, row in dirs.items():
        print(f"| {d} | " + " | ".join(map(str, row)) + " |")
        tot = [x + y for x, y in zip(tot, row)]
    print("| all | " + " | ".join(map(str, tot)) + " |")
    print()
    print("Passes on MPICH, not on Spools:")
    for key, ss, why in only_mpich:
        print(f"- {key}: {ss}: {why}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the entries of some directories")
    r.add_argument("--build", required=True, help="the configured test/mpi folder")
    r.add_argument("--src", required=True, help="the source's test/mpi folder")
    r.add_argument("--dirs", required=True, help="comma-separated directories")
    r.add_argument("--launcher", choices=["spools", "mpich"], default="spools")
    r.add_argument("--spools", default="spools", help="the spools binary")
    r.add_argument("--mpiexec", default="mpiexec", help="MPICH's mpiexec")
    r.add_argument("--timeout", type=float, default=60.0, help="seconds per entry without a timeLimit of its own")
    r.add_argument("--only", help="comma-separated substrings of the keys to run")
    r.add_argument("--out", required=True, help="results, one tab-separated line each")
    r.add_argument("--known", help="the known list: its slow entries are left out")
    r.add_argument("--run-slow", action="store_true", help="run the slow entries too")
    r.add_argument("--jobs", type=int, default=1, help="entries run at once (never two of one directory)")
    r.add_argument("-v", "--verbose", action="store_true")
    c = sub.add_parser("check", help="compare results with the known list")
    c.add_argument("--results", required=True)
    c.add_argument("--known", required=True)
    t = sub.add_parser("table", help="per directory: MPICH against Spools")
    t.add_argument("--spools", required=True)
    t.add_argument("--mpich", required=True)
    t.add_argument("--known")
    a = p.parse_args()
    return {"run": cmd_run, "check": cmd_check, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
