"""The World: init, rank, size, barrier, split, dup, finalize, under `spools run`."""

import pytest


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_hello(run, n):
    job = run(n, "hello.py")
    lines = sorted(l for l in job.lines() if l.startswith("rank "))
    assert lines == sorted("rank %d of %d" % (r, n) for r in range(n))
