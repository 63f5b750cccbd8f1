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


@pytest.mark.parametrize("n", [2, 3])
def test_layouts_example(run, tmp_path, n):
    from conftest import REPO

    job = run(n, REPO / "examples" / "python" / "layouts.py", tmp_path)
    lines = job.lines(0)
    assert lines[0].endswith("stay on their rank") and "cyclic(8) on 1x%d" % n in lines[0], job
    assert lines[1] == "wrote 4800000 bytes as RAID-5 (version 1), read back by rows: identical", job
    assert lines[2].endswith("f[10:12, 3:6] = [[10.003, 10.004, 10.005], [11.003, 11.004, 11.005]]"), job


@pytest.mark.parametrize("n", [3])
def test_alloc_in_the_shared_heap_redistributes_and_frees(run, n):
    job = run(n, "heap_alloc.py")
    assert all(job.lines(r)[-1:] == ["heap ok"] for r in range(n)), job
