"""Point-to-point messaging with real processes, against numpy references computed in
the programs; zero copy proven (in place, tracemalloc)."""

import pytest


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_p2p_every_call(run, n):
    job = run(n, "p2p_basic.py")
    assert sorted(job.lines()) == sorted("p2p ok rank %d" % r for r in range(n))


@pytest.mark.parametrize("n", [2, 3])
def test_zero_copy(run, n):
    job = run(n, "p2p_nocopy.py")
    assert job.lines(0) == ["send peak below limit for %d" % d for d in range(1, n)]
    for r in range(1, n):
        assert job.lines(r) == ["recv in place, peak below limit"], job


@pytest.mark.parametrize("n", [2, 4])
def test_pingpong_program(run, n):
    """The benchmark's program with few iterations (its messages are checked; extra
    ranks only join the barriers)."""
    job = run(n, "p2p_pingpong.py", 50, 1, "8,40000,1048576")
    sizes = [int(l.split()[1]) for l in job.lines(0) if l.startswith("size ")]
    assert sizes == [8, 40000, 1048576], job


@pytest.mark.parametrize("thread", ["1", "0"])
def test_python_in_progress_and_threads(run, thread):
    """Floods with RPC calls in flight (a send waiting for ring room keeps no GIL the
    progress thread needs), wait_any against another thread's wait, and Spools calls
    refused inside an RPC function (p2p_threads.py's docstring)."""
    job = run(2, "p2p_threads.py", timeout=60, env={"SPOOLS_PROGRESS_THREAD": thread})
    assert job.lines(0) == ["threads ok"] and job.lines(1) == ["threads ok"], job
