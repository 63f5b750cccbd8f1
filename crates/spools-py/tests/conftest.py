"""Runs test programs as real jobs: `spools run -n N -- python prog.py ...`, each with a
bounded wait; a job that outlives it is killed with its whole process group."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROGS = HERE / "progs"
REPO = HERE.parents[2]


def spools_bin():
    """The `spools` launcher: $SPOOLS_BIN, else the workspace's debug build."""
    b = os.environ.get("SPOOLS_BIN")
    if b:
        return b
    for profile in ("debug", "release"):
        p = REPO / "target" / profile / "spools"
        if p.exists():
            return str(p)
    pytest.fail("no spools binary: build it (cargo build -p spools-cli) or set SPOOLS_BIN")


class Job:
    """What a finished job left: exit code and both outputs."""

    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    def lines(self, rank=None):
        """Output lines (stdout), of one rank if `rank` is given, without the `[r] `
        prefix the launcher adds (jobs run with --tag-output)."""
        out = []
        for l in self.out.splitlines():
            if l.startswith("[") and "] " in l:
                r, _, text = l[1:].partition("] ")
                if rank is None or r == str(rank):
                    out.append(text)
            elif rank is None:
                out.append(l)
        return out

    def __repr__(self):
        return "Job(code=%r)\n--- stdout\n%s\n--- stderr\n%s" % (self.code, self.out, self.err)


def run_job(n, prog, *args, timeout=120, env=None, launcher_args=("--tag-output",), check=True):
    """Runs `progs/<prog>` (a file name, or a path) on `n` ranks; returns a Job.
    With `check`, a non-zero exit fails the test with both outputs."""
    script = Path(prog)
    if not script.is_absolute():
        script = PROGS / prog
    e = dict(os.environ)
    e.update(env or {})
    cmd = [spools_bin(), "run", "-n", str(n), *launcher_args, "--", sys.executable, str(script), *map(str, args)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The launcher first (it stops its ranks and removes what the job left in
        # /dev/shm), then, after at most 20 s, whatever is left of the group.
        os.kill(p.pid, signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        else:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pytest.fail("job %s -n %d did not end within %ds\n--- stdout\n%s\n--- stderr\n%s" % (prog, n, timeout, out, err))
    job = Job(p.returncode, out, err)
    if check and job.code != 0:
        pytest.fail("job %s -n %d failed: %r" % (prog, n, job))
    return job


def start_announcing(n, prog, *args):
    """Starts `progs/<prog>` on `n` ranks in its own session, without waiting for it:
    each rank prints `pid RANK PID JOB` first. Returns (process, {rank: pid}, job) once
    every rank has said it; fails the test (killing the job) if they do not."""
    cmd = [spools_bin(), "run", "-n", str(n), "--tag-output", "--", sys.executable,
           str(PROGS / prog), *map(str, args)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    pids, jobs = {}, set()
    try:
        while len(pids) < n:
            line = p.stdout.readline()
            if not line:
                break
            text = line.partition("] ")[2].split()
            if text[:1] == ["pid"]:
                pids[int(text[1])] = int(text[2])
                jobs.add(text[3])
    except Exception:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    if len(pids) != n or len(jobs) != 1:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail("the ranks did not start: %s" % p.communicate()[1])
    return p, pids, jobs.pop()


@pytest.fixture
def run():
    """`run(n, "prog.py", *args, timeout=..., check=True)` -> Job."""
    return run_job
