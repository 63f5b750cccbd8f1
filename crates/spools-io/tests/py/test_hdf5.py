"""HDF5 files between Spools and h5py: files Spools jobs write (1 to 5 ranks, random
distributions; rank 0 creates the file and a contiguous dataset through libhdf5, every rank
writes its part at the dataset's offset) are opened by h5py and compared with numpy
references; contiguous datasets h5py writes are read by Spools jobs with random
distributions and checked element by element; what Spools does not read (chunked or
compressed datasets, big-endian types, several datasets unnamed) is refused by name. Every
tool takes FILE:/NAME with NAME in nested groups; a missing libhdf5 (SPOOLS_HDF5_LIB naming
no file) is refused naming the library and how to install it; the Python package as built by
default reads and writes HDF5."""

import os
import random
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import SPOOLS, job, spools
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


def test_every_tool_takes_file_colon_name_in_nested_groups(tmp_path):
    path = tmp_path / "nested.h5"
    a = reference("f32", [6, 5], 11)
    with h5py.File(path, "w") as f:
        f.create_dataset("group/sub/name", data=a)
        f.create_dataset("other", data=np.arange(4, dtype="<i8"))
    named = f"{path}:/group/sub/name"
    ls = spools("ls", named).stdout.decode()
    assert "dataset /group/sub/name" in ls and "dtype f32" in ls and "shape [6, 5]" in ls, ls
    assert spools("cat", named).stdout == a.tobytes()
    # fsck and repair look at the dataset (no "No such file"): no sidecar, no parity.
    r = spools("fsck", named, check=False)
    assert r.returncode != 0 and b"HDF5 file has no checksums" in r.stderr, r.stderr
    r = spools("repair", named, check=False)
    assert r.returncode != 0 and b"this is an HDF5 file" in r.stderr, r.stderr
    # Unnamed, the file's datasets are listed, in groups too.
    r = spools("ls", str(path), check=False)
    assert r.returncode != 0 and b"/group/sub/name" in r.stderr and b"/other" in r.stderr, r.stderr
    r = spools("cat", f"{path}:/group/sub/missing", check=False)
    assert r.returncode != 0 and b"missing" in r.stderr and b"No such file" not in r.stderr, r.stderr
    # A job reads it the same way, with any distribution.
    p = job(3, "bench", "io", "--layout", "f32[6,5] block,* on 3x1", "--file", named, "--read",
            "--verify", "--reps", "1", "--seed", "11")
    assert "verified every element" in p.stdout, p.stdout
    # A file alone in its groups needs no name.
    alone = tmp_path / "alone.h5"
    with h5py.File(alone, "w") as f:
        f.create_dataset("a/b/c", data=a)
    assert "dataset /a/b/c" in spools("ls", str(alone)).stdout.decode()


def test_a_spools_layout_attribute_of_another_shape_is_not_read(tmp_path):
    # Another tool's `spools_layout` attribute: an array of 64 strings, or a number. Only a
    # single variable-length string is read (an array once overflowed the one pointer the
    # read had room for); the dataset is read all the same.
    a = reference("f64", [4, 3], 5)
    for k, value in enumerate([np.array(["x" * 40] * 64, dtype=h5py.string_dtype()),
                               np.int64(7)]):
        path = tmp_path / f"attr{k}.h5"
        with h5py.File(path, "w") as f:
            d = f.create_dataset("data", data=a)
            d.attrs["spools_layout"] = value
        ls = spools("ls", f"{path}:/data").stdout.decode()
        assert "dataset /data" in ls and "written by Spools" not in ls, ls
        assert spools("cat", f"{path}:/data").stdout == a.tobytes()


def test_spools_writes_a_dataset_in_nested_groups(tmp_path):
    path = tmp_path / "w.h5"
    layout = "i32[7,3] cyclic,* on 2x1"
    job(2, "bench", "io", "--layout", layout, "--file", str(path), "--format",
        "hdf5(group/sub/name)", "--write", "--keep", "--reps", "1", "--seed", "5")
    with h5py.File(path, "r") as f:
        d = f["group/sub/name"]
        assert d.shape == (7, 3) and d.chunks is None and d.attrs["spools_layout"] == layout
        assert np.array_equal(d[...], reference("i32", [7, 3], 5))
    ls = spools("ls", f"{path}:/group/sub/name").stdout.decode()
    assert "dataset /group/sub/name" in ls and f"written by Spools from: {layout}" in ls, ls
    assert spools("cat", f"{path}:/group/sub/name").stdout == reference("i32", [7, 3], 5).tobytes()


def test_a_missing_libhdf5_is_named_with_how_to_install_it(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(3.0))
    env = dict(os.environ, SPOOLS_HDF5_LIB=str(tmp_path / "no-such-libhdf5.so"))
    for args in (["ls", str(path)], ["cat", f"{path}:/x"],
                 ["run", "-n", "2", "--", SPOOLS, "bench", "io", "--layout", "f64[3] block on 2",
                  "--file", str(tmp_path / "y.h5"), "--format", "hdf5", "--write", "--reps", "1"]):
        r = subprocess.run([SPOOLS, *args], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode != 0, (args, r.stdout)
        for want in ["HDF5 C library", "no-such-libhdf5.so", "apt-get install libhdf5-103-1",
                     "SPOOLS_HDF5_LIB"]:
            assert want in r.stderr, (args, want, r.stderr)


READ_WITH_PACKAGE = """
import sys
import h5py  # its own libhdf5 (the wheel's) in the same process as the one Spools loads
import numpy as np
import spools
world = spools.init()
path, want = sys.argv[1], np.load(sys.argv[2])
with h5py.File(path, "r") as f:
    assert np.array_equal(f["group/sub/name"][...], want)
got = world.read_file(path + ":/group/sub/name", "f64[8,6] block,* on %dx1" % world.size)
rows = np.array_split(np.arange(8), world.size)[world.rank]
assert np.array_equal(got, want[rows[0]:rows[-1] + 1]), (got, want)
world.write_file(path + ".out.h5", got, "f64[8,6] block,* on %dx1" % world.size,
                 format="hdf5(copy)")
print("ok", world.rank)
"""


def test_the_python_package_as_built_by_default_reads_and_writes_hdf5(tmp_path):
    """The spools package (maturin's default build, no features) reads an h5py file."""
    path = tmp_path / "py.h5"
    a = reference("f64", [8, 6], 21)
    np.save(tmp_path / "want.npy", a)
    with h5py.File(path, "w") as f:
        f.create_dataset("group/sub/name", data=a)
        f.create_dataset("other", data=a)
    prog = tmp_path / "prog.py"
    prog.write_text(READ_WITH_PACKAGE)
    py = sys.executable
    p = subprocess.run([SPOOLS, "run", "-n", "2", "--", py, str(prog), str(path),
                        str(tmp_path / "want.npy")], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0 and p.stdout.count("ok") == 2, (p.stdout, p.stderr)
    with h5py.File(f"{path}.out.h5", "r") as f:
        assert np.array_equal(f["copy"][...], a)


def test_another_libhdf5_version_through_spools_hdf5_lib(tmp_path):
    """h5py's wheel brings its own libhdf5 (1.14 or 2.x, the system's being Debian's 1.10):
    Spools loaded with it through SPOOLS_HDF5_LIB writes and reads as with the system's."""
    import glob
    libs = sorted(glob.glob(os.path.join(os.path.dirname(h5py.__file__) + ".libs", "libhdf5-*.so*")))
    if not libs:
        pytest.skip("this h5py has no bundled libhdf5")
    env = dict(os.environ, SPOOLS_HDF5_LIB=libs[0])
    path = tmp_path / "other.h5"
    layout = "c128[5,4] *,block on 1x2"
    w = subprocess.run([SPOOLS, "run", "-n", "2", "--", SPOOLS, "bench", "io", "--layout", layout,
                        "--file", str(path), "--format", "hdf5(g/h/c)", "--write", "--keep",
                        "--reps", "1", "--seed", "3"], capture_output=True, text=True, timeout=180,
                       env=env)
    assert w.returncode == 0, w.stderr
    want = reference("c128", [5, 4], 3)
    with h5py.File(path, "r") as f:
        assert np.array_equal(f["g/h/c"][...], want) and f["g/h/c"].attrs["spools_layout"] == layout
    for e in (env, os.environ):
        r = subprocess.run([SPOOLS, "cat", f"{path}:/g/h/c"], capture_output=True, timeout=120, env=e)
        assert r.returncode == 0 and r.stdout == want.tobytes(), r.stderr
    big = tmp_path / "big.h5"
    with h5py.File(big, "w") as f:
        f.create_dataset("b", data=np.arange(3, dtype=">i4"))
        f.create_dataset("z", data=np.arange(300.0), chunks=(30,), compression="gzip")
    for name, want in [("b", "i32 (big-endian)"), ("z", "in chunks")]:
        r = subprocess.run([SPOOLS, "ls", f"{big}:/{name}"], capture_output=True, text=True,
                           timeout=120, env=env)
        assert r.returncode != 0 and want in r.stderr, r.stderr
