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


# A bytes(k) layout: local_shape is the grid of k-byte elements (dtype V<k>), so a buffer
# holds local_nbytes bytes; a buffer of the wrong size is refused saying the bytes needed
# (and the arrays that hold them) and the bytes given, with each side's own shape.
BYTES_LAYOUT = r'''
import numpy as np
import spools

world = spools.init()
P, me = world.size, world.rank
L = spools.Layout("bytes(3)[4,5] block,* on %dx1" % P)
rows = L.local_shape(me)[0]
assert L.dtype == np.dtype("V3") and L.itemsize == 3
assert L.local_shape(me) == (rows, 5) and L.local_nbytes(me) == rows * 5 * 3
# Both spellings of the right size are taken.
for a in (np.zeros((rows, 5, 3), dtype=np.uint8), np.zeros((rows, 5), dtype="V3")):
    out = world.redistribute(a, L, L)
    assert out.dtype == np.dtype("V3") and out.shape == (rows, 5), (out.dtype, out.shape)
# The element grid's size in bytes is not enough: refused, on every rank.
bad = np.zeros((rows, 5), dtype=np.uint8)
try:
    world.redistribute(bad, L, L)
except ValueError as e:
    m = str(e)
    want = ("has %d bytes (an array of shape (%d, 5) and dtype uint8)" % (rows * 5, rows),
            "needs %d bytes: %d elements of 3 bytes each in a local shape (%d, 5)" % (rows * 15, rows * 5, rows),
            "dtype V3 of shape (%d, 5), or uint8 of shape (%d, 5, 3)" % (rows, rows))
    for w in want:
        assert w in m or (me != 0 and "rank 0" in m), (w, m)
    print(m)
else:
    raise AssertionError("a buffer of the element grid's size was taken")
print("bytes layout ok")
'''


@pytest.mark.parametrize("n", [1, 2])
def test_bytes_layouts_say_the_bytes_needed_and_given(run, tmp_path, n):
    prog = tmp_path / "bytes_layout.py"
    prog.write_text(BYTES_LAYOUT)
    job = run(n, prog)
    assert all(job.lines(r)[-1:] == ["bytes layout ok"] for r in range(n)), job
    first = job.lines(0)[0]
    assert "needs %d bytes" % (60 // n) in first, job
