"""Zarr v3 arrays between Spools and zarr-python, the reference implementation: arrays
Spools jobs write (1 to 5 ranks, random distributions, sharded or not, compressed or not)
are opened by zarr-python and compared with numpy references; arrays zarr-python writes
(with and without compression, partial shards, missing chunks, big-endian, v2 keys) are
read by Spools jobs with random distributions and checked element by element; damage is
reported by `spools fsck` and by a read, naming the shard and the chunk."""

import os
import random

import numpy as np
import pytest
import zarr
import zarr.codecs

from conftest import job, spools
from layouts import DTYPES, random_layout, reference


def _random_zarr_spec(rng, shape):
    chunks = [rng.randint(1, max(1, n)) for n in shape]
    spec = "chunk=" + "x".join(map(str, chunks))
    if rng.random() < 0.7:
        spec += ",shard=" + "x".join(str(c * rng.randint(1, 3)) for c in chunks)
    spec += "," + rng.choice(["codec=none", "codec=zstd", "codec=zstd,level=1", "codec=gzip"])
    return spec


@pytest.mark.parametrize("seed", range(8))
def test_arrays_spools_writes_are_read_by_zarr_python(tmp_path, seed):
    rng = random.Random(seed)
    ranks = rng.randint(1, 5)
    dtype = rng.choice(sorted(DTYPES))
    shape = [rng.randint(1, 30) for _ in range(rng.randint(1, 3))]
    layout = random_layout(rng, dtype, shape, ranks)
    fmt = f"zarr({_random_zarr_spec(rng, shape)})"
    path = tmp_path / "a.zarr"
    job(ranks, "bench", "io", "--layout", layout, "--file", str(path), "--format", fmt,
        "--write", "--keep", "--reps", "1", "--seed", str(seed))
    a = zarr.open_array(str(path), mode="r")
    assert a.shape == tuple(shape)
    assert a.dtype == np.dtype(DTYPES[dtype]), (a.dtype, dtype)
    want = reference(dtype, shape, seed, fortran=layout.endswith("order=F"))
    got = a[...]
    assert np.array_equal(got, want), (layout, fmt, got, want)
    # Spools' own tools agree: fsck finds every checksum good, cat gives the C-order bytes.
    assert b"every shard index and chunk checksum good" in spools("fsck", str(path)).stdout
    assert spools("cat", str(path)).stdout == np.ascontiguousarray(want).tobytes()


# name, dtype, shape, chunks, shards, compressors, serializer, key encoding
ZARR_PYTHON = [
    ("sharded-zstd-partial", "f32", (37, 21), (4, 5), (8, 10), "auto", None, None),
    ("sharded-raw", "i32", (16, 16), (4, 4), (8, 16), None, None, None),
    ("plain-zstd", "u16", (50,), (7,), None, "auto", None, None),
    ("plain-gzip-3d", "f64", (5, 6, 7), (2, 3, 4), None, zarr.codecs.GzipCodec(level=1), None, None),
    ("big-endian", "i64", (9, 11), (3, 4), None, None, zarr.codecs.BytesCodec(endian="big"), None),
    ("v2-keys", "u8", (12, 13), (5, 5), None, None, None, {"name": "v2", "separator": "."}),
    ("sharded-crc", "c64", (10, 10), (3, 3), (6, 6), [zarr.codecs.Crc32cCodec()], None, None),
]


def _write_with_zarr_python(path, dtype, shape, chunks, shards, compressors, serializer, keys, seed,
                            fortran=False):
    kw = {}
    if serializer is not None:
        kw["serializer"] = serializer
    if keys is not None:
        kw["chunk_key_encoding"] = keys
    a = zarr.create_array(
        store=str(path),
        shape=shape,
        chunks=chunks,
        shards=shards,
        dtype=DTYPES[dtype],
        compressors=compressors,
        fill_value=0,
        zarr_format=3,
        **kw,
    )
    a[...] = reference(dtype, list(shape), seed, fortran)
    return a


@pytest.mark.parametrize("case", ZARR_PYTHON, ids=[c[0] for c in ZARR_PYTHON])
def test_arrays_zarr_python_writes_are_read_by_spools(tmp_path, case):
    name, dtype, shape, chunks, shards, compressors, serializer, keys = case
    rng = random.Random(name)
    seed = rng.randint(0, 1000)
    # The benchmark's values follow its layout's storage order: one order per array.
    fortran = rng.random() < 0.4
    path = tmp_path / f"{name}.zarr"
    _write_with_zarr_python(path, dtype, shape, chunks, shards, compressors, serializer, keys, seed,
                            fortran)
    for _ in range(2):
        ranks = rng.randint(1, 4)
        layout = random_layout(rng, dtype, list(shape), ranks, fortran)
        p = job(ranks, "bench", "io", "--layout", layout, "--file", str(path), "--read",
                "--verify", "--reps", "1", "--seed", str(seed))
        assert "verified every element" in p.stdout, p.stdout
    want = np.ascontiguousarray(reference(dtype, list(shape), seed, fortran))
    assert spools("cat", str(path)).stdout == want.astype(want.dtype.newbyteorder("<")).tobytes()
    ls = spools("ls", str(path)).stdout.decode()
    assert f"shape {list(shape)}" in ls and "Zarr v3 array" in ls, ls


def test_missing_chunks_read_as_the_fill_value_only_where_zarr_says_so(tmp_path):
    # zarr-python writes only part of the array: the rest is its fill value, 7.
    path = tmp_path / "sparse.zarr"
    a = zarr.create_array(store=str(path), shape=(20, 20), chunks=(5, 5), shards=(10, 10),
                          dtype=np.int32, fill_value=7, zarr_format=3)
    a[0:5, 0:10] = np.arange(50, dtype=np.int32).reshape(5, 10)
    a[12:17, 12:20] = -1
    want = a[...]
    assert spools("cat", str(path)).stdout == want.tobytes()
    # A whole shard removed from a foreign array: still fill value.
    shard = path / "c" / "1" / "1"
    os.remove(shard)
    want = zarr.open_array(str(path), mode="r")[...]
    assert spools("cat", str(path)).stdout == want.tobytes()
    job(3, "bench", "io", "--layout", "i32[20,20] cyclic(3),block on 3x1", "--file", str(path),
        "--read", "--reps", "1")
    # In an array Spools wrote whole, a missing shard is lost data: reported, not filled.
    mine = tmp_path / "mine.zarr"
    job(2, "bench", "io", "--layout", "i32[20,20] block,* on 2x1", "--file", str(mine),
        "--format", "zarr(chunk=5x5,shard=10x10)", "--write", "--keep", "--reps", "1")
    os.remove(mine / "c" / "1" / "0")
    f = spools("fsck", str(mine), check=False)
    assert f.returncode != 0
    assert b"c/1/0" in f.stdout and b"missing" in f.stdout, f.stdout
    r = job(2, "bench", "io", "--layout", "i32[20,20] block,* on 2x1", "--file", str(mine),
            "--read", "--reps", "1", check=False)
    assert r.returncode != 0 and "c/1/0" in r.stderr and "missing" in r.stderr, r.stderr


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_flipped_bit_is_reported_naming_the_shard_and_the_chunk(tmp_path, codec):
    path = tmp_path / "a.zarr"
    layout = "f64[40,30] block,block on 2x2"
    job(4, "bench", "io", "--layout", layout, "--file", str(path),
        "--format", f"zarr(chunk=10x10,shard=20x30,codec={codec})", "--write", "--keep", "--reps", "1")
    assert spools("fsck", str(path)).returncode == 0
    shard = path / "c" / "1" / "0"
    data = bytearray(shard.read_bytes())
    # A bit in the second chunk's stored bytes (the index says where it is).
    n = 6  # 2 x 3 chunks of 10x10 in a 20x30 shard
    index = data[-(16 * n + 4):-4]
    off = int.from_bytes(index[16:24], "little")
    ln = int.from_bytes(index[24:32], "little")
    data[off + ln // 2] ^= 0x04
    shard.write_bytes(bytes(data))
    f = spools("fsck", str(path), check=False)
    out = f.stdout.decode()
    assert f.returncode != 0, out
    assert "c/1/0" in out and "chunk [0, 1]" in out, out
    r = job(2, "bench", "io", "--layout", "f64[40,30] *,block on 1x2", "--file", str(path),
            "--read", "--reps", "1", check=False)
    assert r.returncode != 0 and "c/1/0" in r.stderr and "chunk [0, 1]" in r.stderr, r.stderr
    # zarr-python refuses it too (the chunk's CRC32C codec).
    with pytest.raises(Exception):
        zarr.open_array(str(path), mode="r")[...]
    # A flipped bit in the shard index: named as such.
    data = bytearray(shard.read_bytes())
    data[off + ln // 2] ^= 0x04
    data[-10] ^= 0x01
    shard.write_bytes(bytes(data))
    out = spools("fsck", str(path), check=False).stdout.decode()
    assert "c/1/0" in out and "index" in out, out


def test_a_layout_of_another_dataset_is_refused_naming_both(tmp_path):
    path = tmp_path / "a.zarr"
    _write_with_zarr_python(path, "f64", (3, 4), (3, 4), None, None, None, None, 0)
    r = job(1, "bench", "io", "--layout", "i64[3,4] *,* on 1x1", "--file", str(path),
            "--read", "--reps", "1", check=False)
    assert r.returncode != 0
    assert "f64[3, 4]" in r.stderr and "i64[3, 4]" in r.stderr, r.stderr
    # Something that is not a Zarr array is never replaced by one.
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    r = job(1, "bench", "io", "--layout", "f64[3,4] *,* on 1x1", "--file", str(other),
            "--format", "zarr(chunk=3x4)", "--write", "--keep", "--reps", "1", check=False)
    assert r.returncode != 0 and "not replaced" in r.stderr, r.stderr
    assert (other / "keep.txt").read_text() == "mine"


def test_the_readme_example_writes_what_zarr_python_reads(tmp_path):
    # examples/python/zarr_write.py, as the README runs it (with 3 ranks here).
    import subprocess
    import sys
    from conftest import SPOOLS

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))))
    path = tmp_path / "field.zarr"
    p = subprocess.run([SPOOLS, "run", "-n", "3", "--", sys.executable,
                        os.path.join(repo, "examples", "python", "zarr_write.py"), str(path)],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    a = zarr.open_array(str(path), mode="r")
    assert (a.shape, a.shards, a.chunks) == ((1024, 768), (256, 256), (64, 64))
    i, j = np.indices(a.shape)
    assert np.allclose(a[...], np.sin(i / 100.0) * np.cos(j / 50.0), atol=1e-6)
