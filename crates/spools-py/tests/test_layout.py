"""spools.Layout and Comm.redistribute, with real jobs of 1 to 5 ranks (5 oversubscribed
on a 2-core machine), against numpy references."""

import pytest


def test_layout_properties_extents_plan_and_errors(run):
    job = run(1, "layout_checks.py")
    assert job.lines(0) == ["layout checks ok"]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_redistribute(run, n):
    job = run(n, "layout_redistribute.py")
    assert sorted(r for r in range(n) if job.lines(r)[-1:] == ["redistribute ok"]) == list(range(n)), job


@pytest.mark.parametrize("n", [1, 3])
def test_redistribute_and_files_make_no_python_side_copies(run, tmp_path, n):
    job = run(n, "layout_zerocopy.py", tmp_path)
    assert all(job.lines(r) == ["zero copy ok"] for r in range(n)), job
