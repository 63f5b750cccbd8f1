"""Collectives on numpy arrays with real jobs (tests/progs/coll_*.py), 1 to 5 ranks (more
than the 2 cores: oversubscribed), each rank checking its results against numpy
references it computes itself; every rank must report success."""

import pytest


def all_ok(job, n, marker):
    for r in range(n):
        assert marker in job.lines(r), "rank %d did not finish: %r" % (r, job)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_blocking_collectives(run, n):
    """Reductions (4 operators, 7 dtypes, complex sums, in place, out=), data movements
    (10 dtypes incl. complex and records), v-forms with empty blocks, a sub-communicator."""
    all_ok(run(n, "coll_blocking.py"), n, "coll_blocking ok")


def test_blocking_collectives_over_tcp(run):
    all_ok(run(3, "coll_blocking.py", env={"SPOOLS_TRANSPORT": "tcp"}), 3, "coll_blocking ok")


@pytest.mark.parametrize("n,env", [(1, {}), (2, {}), (3, {}), (5, {}), (4, {"SPOOLS_PROGRESS_THREAD": "1"})])
def test_python_reduction_functions(run, n, env):
    """A non-commutative callable in rank order through every reduction (blocking and
    not), a commutative spools.Op, complex through a callable, the callable's exception
    and wrong results raised by the call."""
    all_ok(run(n, "coll_ops.py", env=env), n, "coll_ops ok")


@pytest.mark.parametrize("n,env", [(1, {}), (2, {}), (4, {}), (5, {}), (3, {"SPOOLS_PROGRESS_THREAD": "1"})])
def test_nonblocking_collectives(run, n, env):
    """Every i-collective, several in flight, overlapping with compute, dropped unwaited,
    a callable's exception out of wait()."""
    all_ok(run(n, "coll_nonblocking.py", env=env), n, "coll_nonblocking ok")


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_argument_errors(run, n):
    """Wrong shapes, dtypes, counts, roots, operators: TypeError/ValueError naming the
    expected and the given, on every rank alike where the ranks agree first."""
    all_ok(run(n, "coll_errors.py"), n, "coll_errors ok")


@pytest.mark.parametrize("n", [1, 3, 4])
def test_object_collectives(run, n):
    all_ok(run(n, "coll_obj.py", "objects"), n, "coll_obj ok")


def test_mismatch_across_ranks_ends_the_job(run):
    """Sizes that differ between ranks (not detectable locally): the runtime's error,
    uncaught, ends the job; no hang, no crash."""
    job = run(3, "coll_obj.py", "mismatch", timeout=60, check=False)
    assert job.code != 0, job
    assert "no error" not in job.out
    assert "ranks disagree" in job.err or "truncated" in job.err, job
