"""The MPI ABI's test driver: compiles the C programs of this directory with the
standard ABI's compiler wrapper (`mpicc_abi` of PyPI's mpich wheel, installed by
scripts/test-mpi.sh into target/mpi-venv: $SPOOLS_MPICC_ABI), once per session, and runs
them as real jobs under `spools run -n N`, which puts Spools' libmpi_abi.so.1 first for
its ranks. Every job has a bounded wait: one that outlives it is killed with its whole
process group and fails the test. The programs check their results in C (check.h: a
failed check prints FAIL and ends the job with MPI_Abort)."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
JOB_TIMEOUT = 120


def spools_bin():
    return os.environ.get("SPOOLS_BIN") or str(REPO / "target" / "debug" / "spools")


def mpicc_abi():
    cc = os.environ.get("SPOOLS_MPICC_ABI")
    if not cc or not Path(cc).exists():
        pytest.fail("no mpicc_abi: run the tests through scripts/test-mpi.sh (it installs "
                    "PyPI's mpich wheel into target/mpi-venv and sets SPOOLS_MPICC_ABI)")
    return cc


class Job:
    def __init__(self, cmd, code, out, err, seconds):
        self.cmd, self.code, self.out, self.err, self.seconds = cmd, code, out, err, seconds

    def __repr__(self):
        return "job %s: exit %r after %.2f s\n--- stdout\n%s--- stderr\n%s" % (
            " ".join(self.cmd), self.code, self.seconds, self.out, self.err)


def run_job(cmd, env=None, timeout=JOB_TIMEOUT):
    """Runs `cmd` in its own process group; kills the group if it outlives `timeout`."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("job timed out after %d s (hung): %s\n%s\n%s" % (timeout, cmd, out, err))
    return Job(cmd, p.returncode, out, err, time.monotonic() - start)


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """build(NAME) compiles NAME.c with mpicc_abi (once) and gives the program's path."""
    out = tmp_path_factory.mktemp("mpi-programs")
    built = {}

    def make(name):
        if name not in built:
            exe = out / name
            r = subprocess.run([mpicc_abi(), "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                                "-O1", "-o", str(exe), str(HERE / (name + ".c")), "-lpthread"],
                               capture_output=True, text=True)
            assert r.returncode == 0, "mpicc_abi %s.c failed:\n%s%s" % (name, r.stdout, r.stderr)
            built[name] = exe
        return built[name]

    return make


@pytest.fixture
def spools_run():
    """spools_run(N, PROG, *ARGS) runs a job of N ranks and gives the finished Job."""

    def go(n, prog, *args, timeout=JOB_TIMEOUT, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return run_job([spools_bin(), "run", "-n", str(n), "--", str(prog), *map(str, args)],
                       env=e, timeout=timeout)

    return go
