"""HDF5 files between Spools and h5py: files Spools jobs write (1 to 5 ranks, random
distributions; rank 0 creates the file and a contiguous dataset through libhdf5, every rank
writes its part at the dataset's offset) are opened by h5py and compared with numpy
references; contiguous datasets h5py writes are read by Spools jobs with random
distributions and checked element by element; what Spools does not read (chunked or
compressed datasets, big-endian types, several datasets unnamed) is refused by name."""

import random

import h5py
import numpy as np
import pytest

from conftest import job, spools
from layouts import DTYPES, random_layout, reference


@pytest.mark.parametrize("seed", range(6))
def test_files_spools_writes_are_read_by_h5py(tmp_path, seed):
    rng = random.Random(1000 + seed)
    ranks = rng.randint(1, 5)
    dtype = rng.choice(sorted(DTYPES))
    shape = [rng.randint(1, 40) for _ in range(rng.randint(1, 3))]
    # HDF5 stores C order: the written layout is in C order.
    layout = random_layout(rng, dtype, shape, ranks, fortran=False)
    name = rng.choice(["data", "temperature", "grid/field"][:2])
    path = tmp_path / "a.h5"
    job(ranks, "bench", "io", "--layout", layout, "--file", str(path), "--format", f"hdf5({name})",
        "--write", "--keep", "--reps", "1", "--seed", str(seed))
    with h5py.File(path, "r") as f:
        d = f[name]
        assert d.shape == tuple(shape) and d.chunks is None and d.compression is None
        assert d.dtype == np.dtype(DTYPES[dtype]), (d.dtype, dtype)
        assert d.attrs["spools_layout"] == layout
        assert "spools_version" in d.attrs
        want = reference(dtype, shape, seed)
        assert np.array_equal(d[...], want), (layout, d[...], want)
    assert spools("cat", str(path)).stdout == want.tobytes()
    ls = spools("ls", str(path)).stdout.decode()
    assert f"shape {shape}" in ls and "HDF5 file" in ls, ls


def test_a_file_of_another_element_type_order_or_shape_is_refused(tmp_path):
    path = tmp_path / "a.h5"
    job(2, "bench", "io", "--layout", "f64[6,4] block,* on 2x1", "--file", str(path),
        "--format", "hdf5", "--write", "--keep", "--reps", "1")
    for bad in ["i64[6,4] *,* on 1x1", "f64[4,6] *,* on 1x1", "f64[6,4] *,* on 1x1 order=F"]:
        r = job(1, "bench", "io", "--layout", bad, "--file", str(path), "--read", "--reps", "1",
                check=False)
        assert r.returncode != 0 and "holds dataset /data f64[6, 4]" in r.stderr, (bad, r.stderr)
    # A Fortran-order layout cannot be written as an HDF5 dataset (stored in C order).
    r = job(2, "bench", "io", "--layout", "f64[6,4] block,* on 2x1 order=F", "--file",
            str(tmp_path / "f.h5"), "--format", "hdf5", "--write", "--reps", "1", check=False)
    assert r.returncode != 0 and "C order" in r.stderr, r.stderr


# name, dtype, shape
H5PY = [
    ("f32-2d", "f32", (37, 21)),
    ("i16-1d", "i16", (50,)),
    ("c128-3d", "c128", (4, 5, 6)),
    ("u8-2d", "u8", (13, 17)),
    ("i64-2d", "i64", (9, 11)),
]


@pytest.mark.parametrize("case", H5PY, ids=[c[0] for c in H5PY])
def test_contiguous_datasets_h5py_writes_are_read_by_spools(tmp_path, case):
    name, dtype, shape = case
    rng = random.Random(name)
    seed = rng.randint(0, 1000)
    path = tmp_path / f"{name}.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=reference(dtype, list(shape), seed))
    for _ in range(2):
        ranks = rng.randint(1, 4)
        layout = random_layout(rng, dtype, list(shape), ranks, fortran=False)
        p = job(ranks, "bench", "io", "--layout", layout, "--file", str(path), "--read",
                "--verify", "--reps", "1", "--seed", str(seed))
        assert "verified every element" in p.stdout, p.stdout
    assert spools("cat", str(path)).stdout == reference(dtype, list(shape), seed).tobytes()


def test_what_spools_does_not_read_is_refused_by_name(tmp_path):
    path = tmp_path / "many.h5"
    a = reference("f32", [20, 30])
    with h5py.File(path, "w") as f:
        f.create_dataset("plain", data=a)
        f.create_dataset("packed", data=a, chunks=(5, 10), compression="gzip")
        f.create_dataset("big", data=a.astype(">f4"))
    layout = "f32[20,30] block,* on 2x1"
    r = job(2, "bench", "io", "--layout", layout, "--file", str(path), "--read", "--reps", "1",
            check=False)
    assert r.returncode != 0 and "FILE:/NAME" in r.stderr and "/packed" in r.stderr, r.stderr
    ok = job(2, "bench", "io", "--layout", layout, "--file", f"{path}:/plain", "--read",
             "--verify", "--reps", "1")
    assert "verified every element" in ok.stdout
    r = job(2, "bench", "io", "--layout", layout, "--file", f"{path}:/packed", "--read",
            "--reps", "1", check=False)
    assert r.returncode != 0 and "in chunks" in r.stderr and "contiguous" in r.stderr, r.stderr
    r = job(2, "bench", "io", "--layout", layout, "--file", f"{path}:/big", "--read",
            "--reps", "1", check=False)
    assert r.returncode != 0 and "big-endian" in r.stderr, r.stderr
