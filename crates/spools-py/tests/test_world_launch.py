"""Starting the rank: implicitly on import under a launcher (and not with
SPOOLS_PY_INIT=0), finalised at exit; and under Open MPI's mpirun."""

import os
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
    assert sorted(l for l in p.stdout.splitlines() if l.startswith("mpirun")) == [
        "mpirun rank 0 of 2 ok", "mpirun rank 1 of 2 ok"], (p.stdout, p.stderr)
