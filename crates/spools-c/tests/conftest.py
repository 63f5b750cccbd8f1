"""The C interface's test driver: compiles the C programs of this directory against the
installed library (spools.h, libspools and spools.pc under $SPOOLS_C_PREFIX, found
through pkg-config as scripts/test-c.sh sets PKG_CONFIG_PATH), once per session, and runs
them as real jobs, `spools run -n N --tag-output -- PROG ARGS`, each with a bounded wait:
a job that outlives it is killed with its whole process group and fails the test.

The programs check their results in C (ctest.h) and print `ok ...` lines; the tests
check that every rank printed exactly its expected lines, and the exit codes."""

import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
JOB_TIMEOUT = 120  # seconds for one job (the suite's jobs take about a second each)
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"]

# The C programs of this suite (NAME.c here), and those also linked statically (against
# libspools.a), as NAME_static.
PROGRAMS = ("messaging", "collectives", "redistribute", "files", "pipe_producer",
            "pipe_reader", "errors", "am_rpc", "config", "frames")
STATIC = ("config",)


def _spools_bin():
    b = os.environ.get("SPOOLS_BIN")
    if b:
        return b
    p = REPO / "target" / "debug" / "spools"
    if p.exists():
        return str(p)
    pytest.fail("no spools binary: build it (cargo build -p spools-cli) or set SPOOLS_BIN")


def _pkg_config(*args):
    r = subprocess.run(["pkg-config", *args, "spools"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("pkg-config %s spools failed (is PKG_CONFIG_PATH set to the installed "
                    "spools.pc? scripts/test-c.sh does it): %s" % (" ".join(args), r.stderr))
    return shlex.split(r.stdout)


class Job:
    """What a finished job left: exit code and both outputs."""

    def __init__(self, cmd, code, out, err):
        self.cmd, self.code, self.out, self.err = cmd, code, out, err

    def lines(self, rank=None):
        """Stdout lines, of one rank if `rank` is given, without the `[r] ` prefix the
        launcher adds (--tag-output)."""
        out = []
        for line in self.out.splitlines():
            if line.startswith("[") and "] " in line:
                r, _, text = line[1:].partition("] ")
                if rank is None or r == str(rank):
                    out.append(text)
            elif rank is None:
                out.append(line)
        return out

    def ok_lines(self, rank):
        """The `ok ...` lines of a rank, without `ok `."""
        return [l[3:] for l in self.lines(rank) if l.startswith("ok ")]

    def expect_ok(self, n, expected):
        """Exit code 0, no FAIL line, and every rank 0..n-1 printed exactly `expected`
        (a list of `ok` lines without `ok `, in order). A failure shows the whole job's
        output (the C checks' FAIL lines say what went wrong)."""
        problems = []
        if self.code != 0:
            problems.append("exit code %r" % self.code)
        if "FAIL" in self.err or "FAIL" in self.out:
            problems.append("FAIL lines")
        for r in range(n):
            if self.ok_lines(r) != list(expected):
                problems.append("rank %d printed %r, expected %r"
                                % (r, self.ok_lines(r), list(expected)))
        if problems:
            pytest.fail("%s\n%r" % ("; ".join(problems), self), pytrace=False)

    def __repr__(self):
        return "Job(%s, code=%r)\n--- stdout\n%s\n--- stderr\n%s" % (
            " ".join(map(str, self.cmd)), self.code, self.out, self.err)


def start_job(n, argv, env=None, launcher=True):
    """Starts `spools run -n n --tag-output -- argv` (or argv alone) in its own session."""
    cmd = [_spools_bin(), "run", "-n", str(n), "--tag-output", "--", *map(str, argv)] if launcher \
        else list(map(str, argv))
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                         start_new_session=True)
    return cmd, p


def finish_job(cmd, p, timeout=JOB_TIMEOUT):
    """Waits for a started job (at most `timeout` s; then kills its process group and
    fails the test); returns its Job."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("%s did not end within %d s\n--- stdout\n%s\n--- stderr\n%s"
                    % (" ".join(cmd), timeout, out, err))
    return Job(cmd, p.returncode, out, err)


def run_job(n, argv, env=None, timeout=JOB_TIMEOUT, launcher=True):
    """Runs a job to its end; returns its Job (the caller checks the exit code)."""
    cmd, p = start_job(n, argv, env, launcher)
    return finish_job(cmd, p, timeout)


@pytest.fixture(scope="session")
def spools_bin():
    return _spools_bin()


@pytest.fixture(scope="session")
def cprogs(tmp_path_factory):
    """The PROGRAMS compiled once with the flags pkg-config gives (and the STATIC ones
    also against libspools.a, as NAME_static): {name: path}."""
    if not os.environ.get("SPOOLS_C_PREFIX"):
        pytest.fail("SPOOLS_C_PREFIX is not set: run the suite with scripts/test-c.sh")
    out = tmp_path_factory.mktemp("cprogs")
    cflags = _pkg_config("--cflags")
    libs = _pkg_config("--libs")
    static_libs = ["-l:libspools.a" if f == "-lspools" else f
                   for f in _pkg_config("--static", "--libs")]
    assert "-lspools" in libs and "-l:libspools.a" in static_libs, (libs, static_libs)
    progs = {}
    jobs = []
    for name in PROGRAMS:
        src = HERE / (name + ".c")
        jobs.append((name, src, libs))
        if name in STATIC:
            jobs.append((name + "_static", src, static_libs))
    for name, src, lib in jobs:
        exe = out / name
        cmd = ["cc", *CFLAGS, str(src), *cflags, *lib, "-o", str(exe)]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
        if r.returncode != 0 or r.stderr.strip():
            pytest.fail("compiling %s failed or warned:\n%s\n%s%s"
                        % (src.name, " ".join(cmd), r.stdout, r.stderr))
        progs[name] = exe
    return progs


@pytest.fixture(scope="session")
def pipe_consumer():
    """examples/pipe_consumer.rs, built with cargo (the Rust end of the pipe test)."""
    cmd = ["cargo", "build", "--locked", "-p", "spools-c", "--example", "pipe_consumer"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        pytest.fail("%s failed:\n%s" % (" ".join(cmd), r.stderr))
    exe = REPO / "target" / "debug" / "examples" / "pipe_consumer"
    assert exe.exists(), exe
    return exe


@pytest.fixture
def run():
    """`run(n, [prog, args...], env=None, timeout=..., launcher=True)` -> Job."""
    return run_job


@pytest.fixture
def start():
    """`start(n, argv, env=None)` -> (cmd, Popen), finished by `finish(cmd, p)`."""
    return start_job


@pytest.fixture
def finish():
    return finish_job
