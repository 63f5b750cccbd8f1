"""Parallel files: write with one rank count and layout, read back with others, in
every format; spools.open in one process; RAID-5 repairs and damage; the errors."""

import json
import os
import sys

import numpy as np
import pytest

from conftest import PROGS

sys.path.insert(0, str(PROGS))
from layout_ref import global_array  # noqa: E402

WRITER = "f64[29,13] cyclic(3),* on 3x1"
REF = global_array(WRITER, seed=3)


def written(run, d, n=3, spec=WRITER):
    job = run(n, "files_rw.py", "write", d, spec)
    for r in range(n):
        assert job.lines(r) == ["wrote a.npy", "wrote a.bin", "wrote p.npy", "wrote r0", "wrote r5"], job
    return d


def test_write_then_read_with_other_ranks_layouts_and_one_process(run, tmp_path):
    d = written(run, tmp_path)
    # What numpy reads of the single files.
    assert np.array_equal(np.load(d / "a.npy"), REF)
    assert np.array_equal(np.load(d / "p.npy"), REF)
    assert np.array_equal(np.fromfile(d / "a.bin", dtype=np.float64).reshape(29, 13), REF)
    for n, spec in [(1, "f64[29,13] block,* on 1x1"), (2, "f64[29,13] *,block on 1x2"),
                    (5, "f64[29,13] block,block on 5x1"), (4, "f64[29,13] cyclic,cyclic(4) on 2x2")]:
        job = run(n, "files_rw.py", "read", d, spec)
        for r in range(n):
            assert job.lines(r) == ["read a.npy", "read a.bin", "read p.npy", "read r0", "read r5"], job
    job = run(1, "files_open.py", d, env={"SPOOLS_PY_INIT": "0"})
    assert job.lines(0) == ["open ok"]


def units(path):
    """The unit files of a striped file's current version, in unit order."""
    m = json.loads(path.read_text())
    return [path.parent / u["path"] for u in m["units"]]


def damaged(run, path, n=3, rows=None):
    args = [path, WRITER.replace("on 3x1", "on %dx1" % n)] + (list(rows) if rows else [])
    job = run(n, "files_damaged.py", *args)
    return job


def flip(p, at):
    b = bytearray(p.read_bytes())
    b[at] ^= 0x5A
    p.write_bytes(bytes(b))


def test_raid5_rebuilds_a_lost_or_damaged_unit_and_reports_more(run, tmp_path):
    written(run, tmp_path)
    r5 = tmp_path / "r5"
    u = units(r5)
    assert len(u) == 4 and all(p.exists() for p in u)
    saved = u[1].read_bytes()
    # A lost unit: every block of it is rebuilt from parity.
    u[1].unlink()
    job = damaged(run, r5)
    assert [job.lines(r)[0] for r in range(3)] == ["read ok"] * 3, job
    assert job.lines(0)[1] == "open ok", job
    # A flipped byte: its block fails its checksum and is rebuilt from parity.
    u[1].write_bytes(saved)
    flip(u[2], 5)
    job = damaged(run, r5, n=2)
    assert [job.lines(r)[0] for r in range(2)] == ["read ok"] * 2, job
    assert job.lines(0)[1] == "open ok", job
    # Both: two blocks of one stripe row are beyond parity: FileDamageError on every
    # rank, never wrong data.
    u[1].unlink()
    job = damaged(run, r5)
    for r in range(3):
        assert job.lines(r)[0].startswith("read raised FileDamageError"), job
    assert job.lines(0)[1].startswith("open raised FileDamageError"), job
    assert "row" in job.lines(0)[0]


def test_raid0_damage_is_reported_and_slices_read_only_what_they_need(run, tmp_path):
    written(run, tmp_path)
    r0 = tmp_path / "r0"
    u = units(r0)
    saved = u[0].read_bytes()
    # Unit 0's first block holds the stream's first 256 bytes: rows 0-2 of the array.
    flip(u[0], 3)
    job = damaged(run, r0, n=2, rows=(20, 29))
    for r in range(2):
        assert job.lines(r)[0].startswith("read raised FileDamageError"), job
    assert "CRC32C" in job.lines(0)[0] and "unit 0" in job.lines(0)[0], job
    assert job.lines(0)[1].startswith("open raised FileDamageError"), job
    # Rows 20-28 lie in other blocks: the slice reads only those, and succeeds.
    assert job.lines(0)[2] == "slice ok", job
    # A missing unit of a file without parity.
    u[0].write_bytes(saved)
    u[1].unlink()
    job = damaged(run, r0, n=1, rows=(0, 2))
    assert job.lines(0)[0].startswith("read raised FileDamageError"), job
    assert "missing" in job.lines(0)[0], job


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_file_errors(run, tmp_path, n):
    job = run(n, "files_errors.py", tmp_path)
    assert all(job.lines(r)[-1:] == ["errors ok"] for r in range(n)), job
