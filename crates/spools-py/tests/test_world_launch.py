"""Starting the rank: implicitly on import under a launcher (and not with
SPOOLS_PY_INIT=0), finalised at exit; and under Open MPI's mpirun."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import PROGS


@pytest.mark.parametrize("n", [1, 3])
def test_implicit_init_on_import(run, n):
    job = run(n, "world_implicit.py")
    assert sorted(job.lines()) == sorted("implicit rank %d of %d" % (r, n) for r in range(n))


def test_no_implicit_init_when_disabled(run):
    job = run(2, "world_implicit.py", env={"SPOOLS_PY_INIT": "0"})
    assert sorted(job.lines()) == ["explicit rank 0 of 2", "explicit rank 1 of 2"]


def test_under_mpirun():
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        if os.environ.get("SPOOLS_REQUIRE_MPI") == "1":
            pytest.fail("mpirun is missing but SPOOLS_REQUIRE_MPI=1: install Debian's openmpi-bin")
        pytest.skip("mpirun not found (Debian's openmpi-bin)")
    with tempfile.TemporaryDirectory() as d:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPOOLS_")}
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2",
               "-x", "SPOOLS_BOOTSTRAP=file:%s" % os.path.join(d, "rdv"),
               sys.executable, str(PROGS / "world_mpirun.py")]
        p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=120, start_new_session=True)
    assert p.returncode == 0, (p.stdout, p.stderr)
    # mpirun forwards each rank's output in pieces: lines of two ranks may interleave.
    got = sorted(re.findall(r"mpirun rank (\d) of 2 ok", p.stdout))
    assert got == ["0", "1"], (p.stdout, p.stderr)


@pytest.mark.parametrize("n", [2, 3])
def test_abort_ends_the_job(run, n):
    job = run(n, "world_abort.py", check=False)
    assert job.code == 7, job  # the aborting rank's code
    assert job.lines(1) == ["aborting"], job
    for r in range(n):
        if r != 1:
            assert job.lines(r) == ["peer gone rank %d" % r], job


@pytest.mark.parametrize("n", [2, 3])
def test_rank_that_exits_with_failure_ends_the_job(run, n):
    job = run(n, "world_exit.py", check=False, timeout=60)
    assert job.code == 3, job
    assert "recv returned" not in job.out
    assert job.err.count("this rank stopped because the job is ending") == n - 1, job
    assert "Traceback" not in job.err, job
