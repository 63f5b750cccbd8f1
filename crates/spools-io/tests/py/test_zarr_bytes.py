"""Zarr arrays of `bytes(n)` elements: Spools writes zarr-python's `raw_bytes` data type
(`length_bytes` n, a base64 fill value), which zarr-python and tensorstore both open
(neither opens the core spec's `r<bits>` with a list fill value, which Spools wrote
before); Spools reads both forms, and `raw_bytes` arrays zarr-python writes. Sharded
`bytes(n)` arrays are refused at write time: zarr-python cannot read raw_bytes in shards
(zarr-python issue #3054)."""

import base64
import ctypes
import json
import math

import numpy as np
import pytest
import tensorstore as ts
import zarr

from conftest import job, spools

# zarr-python warns that raw_bytes has no Zarr v3 extension spec yet; it is its own type.
pytestmark = pytest.mark.filterwarnings("ignore:The data type")


def reference_bytes(n, shape, seed):
    """The dataset `spools bench io --write --seed SEED` writes for `bytes(n)[shape]`:
    element i holds the little-endian bytes of i + seed (repeated after 8), in C order."""
    count = math.prod(shape)
    v = np.arange(count, dtype=np.uint64) + np.uint64(seed)
    cols = [((v >> np.uint64(8 * (i % 8))) & np.uint64(0xFF)).astype(np.uint8) for i in range(n)]
    return np.stack(cols, axis=-1).reshape(*shape, n)


def tensorstore_bytes(path):
    """The array tensorstore reads at `path` as uint8 of shape (*shape, n). tensorstore
    opens `raw_bytes` as dtype `byte` with an extra dimension of the element's bytes,
    which its numpy conversion gives as a zero-size void dtype (which hides the values):
    the bytes are taken from the array's memory, which tensorstore filled."""
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
    assert str(t.dtype) == 'dtype("byte")', t.dtype
    a = t.read().result()
    info = a.__array_interface__
    count = math.prod(a.shape)
    assert info["strides"] in (None, tuple(int(np.prod(a.shape[i + 1:])) for i in range(a.ndim))), info
    raw = ctypes.string_at(info["data"][0], count)
    return np.frombuffer(raw, dtype=np.uint8).reshape(a.shape)


@pytest.mark.parametrize(
    "ranks,layout,spec",
    [
        (3, "bytes(3)[13,7] block,cyclic(2) on 3x1", "zarr(chunk=4x3,codec=zstd)"),
        (2, "bytes(3)[10] cyclic(3) on 2", "zarr(chunk=4)"),
        (1, "bytes(5)[6,4] *,* on 1x1", "zarr(chunk=5x2,codec=gzip)"),
    ],
)
def test_bytes_arrays_spools_writes_are_read_by_zarr_python_and_tensorstore(tmp_path, ranks, layout, spec):
    n = int(layout[len("bytes("):layout.index(")")])
    shape = json.loads(layout[layout.index("["):layout.index("]") + 1])
    seed = 11
    path = tmp_path / "b.zarr"
    job(ranks, "bench", "io", "--layout", layout, "--file", str(path), "--format", spec,
        "--write", "--keep", "--reps", "1", "--seed", str(seed))
    meta = json.loads((path / "zarr.json").read_text())
    assert meta["data_type"] == {"name": "raw_bytes", "configuration": {"length_bytes": n}}, meta
    assert base64.b64decode(meta["fill_value"], validate=True) == bytes(n), meta
    want = reference_bytes(n, shape, seed)
    assert spools("cat", str(path)).stdout == want.tobytes()

    a = zarr.open_array(str(path), mode="r")
    assert a.shape == tuple(shape) and a.dtype == np.dtype(f"V{n}"), (a.shape, a.dtype)
    assert a.fill_value.tobytes() == bytes(n)
    got = np.ascontiguousarray(a[...]).view(np.uint8).reshape(*shape, n)
    assert np.array_equal(got, want)

    got = tensorstore_bytes(path)
    assert got.shape == (*shape, n)
    assert np.array_equal(got, want)

    # And Spools reads it back, with another distribution.
    other = layout.split(" ")[0] + " " + ("cyclic" + ",*" * (len(shape) - 1)) + " on 2" + "x1" * (len(shape) - 1)
    p = job(2, "bench", "io", "--layout", other, "--file", str(path), "--read", "--verify",
            "--reps", "1", "--seed", str(seed))
    assert "verified every element" in p.stdout, p.stdout


def test_the_old_r_bits_form_is_still_read(tmp_path):
    # What Spools wrote before: data type r24 and a fill value list.
    path = tmp_path / "old.zarr"
    job(2, "bench", "io", "--layout", "bytes(3)[9,4] block,* on 2x1", "--file", str(path),
        "--format", "zarr(chunk=3x4)", "--write", "--keep", "--reps", "1", "--seed", "4")
    meta = json.loads((path / "zarr.json").read_text())
    meta["data_type"] = "r24"
    meta["fill_value"] = [0, 0, 0]
    (path / "zarr.json").write_text(json.dumps(meta))
    p = job(3, "bench", "io", "--layout", "bytes(3)[9,4] *,cyclic on 1x3", "--file", str(path),
            "--read", "--verify", "--reps", "1", "--seed", "4")
    assert "verified every element" in p.stdout, p.stdout
    assert spools("cat", str(path)).stdout == reference_bytes(3, [9, 4], 4).tobytes()
    assert "r24" in spools("ls", str(path)).stdout.decode()


def test_raw_bytes_arrays_zarr_python_writes_are_read_by_spools(tmp_path):
    path = tmp_path / "zp.zarr"
    want = reference_bytes(3, [7, 5], 9)
    a = zarr.create_array(store=str(path), shape=(7, 5), chunks=(3, 2),
                          dtype=np.dtype("V3"), fill_value=np.void(b"\x01\x02\x03"), zarr_format=3)
    a[...] = want.reshape(-1).view("V3").reshape(7, 5)
    # Unwritten parts are the fill value: leave one chunk out.
    a[6:7, 4:5] = np.void(b"\x01\x02\x03")
    expect = want.copy()
    expect[6, 4] = [1, 2, 3]
    assert spools("cat", str(path)).stdout == expect.tobytes()
    assert "raw_bytes(length_bytes=3)" in spools("ls", str(path)).stdout.decode()
    p = job(2, "bench", "io", "--layout", "bytes(3)[7,5] cyclic,* on 2x1", "--file", str(path),
            "--read", "--reps", "1")
    assert p.returncode == 0, p.stderr


def test_sharded_bytes_arrays_are_refused_at_write_time_saying_why(tmp_path):
    path = tmp_path / "s.zarr"
    p = job(2, "bench", "io", "--layout", "bytes(3)[8,4] block,* on 2x1", "--file", str(path),
            "--format", "zarr(chunk=2x4,shard=4x4)", "--write", "--keep", "--reps", "1", check=False)
    assert p.returncode != 0
    assert "not written in shards" in p.stderr and "zarr-python issue #3054" in p.stderr, p.stderr
    assert "leave out shard=" in p.stderr, p.stderr
    assert not path.exists()
