"""mpi4py (built against the MPI standard ABI) and the `spools` package in one program:
scripts/test-mpi4py.sh installs both into target/mpi-venv and runs this file. Under
`spools run`, a Python interpreter of a virtual environment holding `spools` gets the
package's extension as its libmpi_abi.so.1, so mpi4py and spools are one runtime
whichever is imported first; alone, importing spools first does the same."""

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from conftest import run_job, spools_bin  # noqa: E402  (the MPI tests' job runner)

PYTHON = sys.executable


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("order", ["spools-first", "mpi4py-first"])
def test_mpi4py_and_spools_share_ranks_and_communicators(order, n):
    job = run_job([spools_bin(), "run", "-n", str(n), "--", PYTHON,
                   str(HERE / "interop.py"), order])
    assert job.code == 0, job
    assert sorted(job.out.splitlines()) == [
        "ok interop %s rank %d of %d" % (order, r, n) for r in range(n)], job


def test_alone_spools_first_is_one_runtime():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOOLS_", "PMI"))}
    job = run_job([PYTHON, str(HERE / "interop.py"), "spools-first"], env=env)
    assert job.code == 0, job
    assert job.out.splitlines() == ["ok interop spools-first rank 0 of 1"], job


def test_a_communicator_of_another_mpi_library_is_refused_with_the_fix():
    # Alone, mpi4py imported first finds MPICH's libmpi_abi.so.1 through its RUNPATH.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOOLS_", "PMI"))}
    env.pop("LD_LIBRARY_PATH", None)
    code = ("from mpi4py import MPI\nimport spools\n"
            "assert 'Spools' not in MPI.Get_library_version()\n"
            "try:\n    spools.Comm(MPI.COMM_WORLD)\n"
            "except spools.errors.InitError as e:\n    print(e)\n")
    job = run_job([PYTHON, "-c", code], env=env)
    assert job.code == 0, job
    assert "mpi4py loaded another libmpi_abi.so.1" in job.out, job
    assert "spools run" in job.out and "import spools before mpi4py.MPI" in job.out, job


def test_mpi4py_futures_pool_spawns_its_workers_and_maps_every_task():
    # examples/mpi/pool_mpi4py.py: MPIPoolExecutor spawns 4 workers (MPI_Comm_spawn) from
    # one parent and maps 1000 tasks over them; every result comes back, in order.
    example = HERE.parents[3] / "examples" / "mpi" / "pool_mpi4py.py"
    job = run_job([spools_bin(), "run", "-n", "1", "--", PYTHON, str(example), "4", "1000"])
    assert job.code == 0, job
    assert job.out.splitlines() == ["ok pool 4 workers 1000 tasks"], job


def test_a_spawn_s_intercommunicator_and_merged_communicator_are_spools_comms_on_both_sides():
    job = run_job([spools_bin(), "run", "-n", "1", "--", PYTHON, str(HERE / "spawned.py")])
    assert job.code == 0, job
    assert sorted(job.out.splitlines()) == ["child 0 of 2: 1 30", "child 1 of 2: 1 30",
                                            "parent: [0, 100] 30"], job
