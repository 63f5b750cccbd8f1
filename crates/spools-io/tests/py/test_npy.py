""".npy files numpy writes, read strictly: a file whose element type, order or shape is
not the layout's is refused naming both (never returned as other values), Fortran-order
files are read when the layout says order=F, big-endian files are refused (not
converted), and `spools ls` shows the dtype and shape."""

import numpy as np

from conftest import job, spools


def test_npy_files_are_read_only_as_what_they_hold(tmp_path):
    a = tmp_path / "a.npy"
    np.save(a, np.arange(12, dtype="<f8").reshape(3, 4))
    r = job(1, "bench", "io", "--layout", "i64[3,4] *,* on 1x1", "--file", str(a),
            "--format", "npy", "--read", "--reps", "1", check=False)
    assert r.returncode != 0
    assert "<f8" in r.stderr and "<i8" in r.stderr, r.stderr
    ok = job(2, "bench", "io", "--layout", "f64[3,4] cyclic,* on 2x1", "--file", str(a),
             "--format", "npy", "--read", "--verify", "--reps", "1")
    assert "verified every element" in ok.stdout
    ls = spools("ls", str(a)).stdout.decode()
    assert "dtype <f8" in ls and "shape [3, 4]" in ls, ls

    f = tmp_path / "f.npy"
    # Fortran order, stored as 0, 1, 2, ... (what the benchmark checks for order=F).
    np.save(f, np.arange(12, dtype="<i8").reshape(4, 3).T)
    r = job(1, "bench", "io", "--layout", "i64[3,4] *,* on 1x1", "--file", str(f),
            "--read", "--reps", "1", check=False)
    assert r.returncode != 0 and "Fortran order" in r.stderr, r.stderr
    ok = job(2, "bench", "io", "--layout", "i64[3,4] *,cyclic on 1x2 order=F", "--file", str(f),
             "--read", "--verify", "--reps", "1")
    assert "verified every element" in ok.stdout
    assert "in Fortran order" in spools("ls", str(f)).stdout.decode()

    b = tmp_path / "b.npy"
    np.save(b, np.arange(12, dtype=">f8").reshape(3, 4))
    r = job(1, "bench", "io", "--layout", "f64[3,4] *,* on 1x1", "--file", str(b),
            "--read", "--reps", "1", check=False)
    assert r.returncode != 0 and ">f8" in r.stderr, r.stderr


def test_a_header_that_is_not_numpys_dictionary_is_refused(tmp_path):
    good = tmp_path / "g.npy"
    np.save(good, np.zeros(4, dtype="<u2"))
    raw = good.read_bytes()
    for old, new in [
        (b"'shape': (4,)", b"'shape': (4,), 'x': 1"),
        (b"'descr': '<u2'", b"'descr': '<u2', 'descr': '<u2'"),
        (b"'fortran_order': False", b"'fortran_order': 0"),
        (b"{", b"["),
    ]:
        bad = tmp_path / "bad.npy"
        changed = raw.replace(old, new, 1)
        # Keep the header length: trim padding for what was added.
        grow = len(changed) - len(raw)
        if grow > 0:
            changed = changed.replace(b" " * grow + b"\n", b"\n", 1)
        elif grow < 0:
            changed = changed.replace(b"}", b"}" + b" " * -grow, 1)
        assert len(changed) == len(raw)
        bad.write_bytes(changed)
        r = spools("ls", str(bad), check=False)
        assert r.returncode != 0, (new, r.stdout)
