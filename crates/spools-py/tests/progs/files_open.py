"""`files_open.py DIR`: spools.open in one process, without init (run with
SPOOLS_PY_INIT=0): the files files_rw.py wrote, .npy files numpy wrote (C and F order,
3-d), a canonical file seen through dtype=/shape=/layout=; every selection against
numpy's; the errors."""

import os
import sys

import numpy as np

import spools
from layout_ref import global_array

d = sys.argv[1]
assert not spools.initialized()
ref = global_array("f64[29,13] block,* on 1x1", seed=3)

KEYS = [
    (), Ellipsis, 0, -1, 28, slice(None), slice(10, 20), slice(-5, None), slice(20, 10),
    (slice(10, 20), slice(None)), (slice(10, 20), slice(3, 5)), (3, slice(2, 9)),
    (slice(None), 4), (slice(None), slice(12, 13)), (-2, -3), (Ellipsis, 7),
    (slice(0, 29), slice(1, 12)), (np.int64(5), Ellipsis), (slice(5, 5), 2),
]


def check(f, ref):
    assert f.shape == ref.shape and f.dtype == ref.dtype, (f.shape, f.dtype)
    assert len(f) == ref.shape[0] and f.ndim == ref.ndim and f.size == ref.size
    assert f.nbytes == ref.nbytes
    whole = f.read()
    assert np.array_equal(whole, ref) and np.array_equal(f[()], ref)
    assert np.array_equal(np.asarray(f), ref)
    for k in KEYS:
        if isinstance(k, tuple) and len(k) > ref.ndim:
            continue
        got, want = f[k], ref[k]
        assert got.shape == want.shape and np.array_equal(got, want), (f.path, k, got, want)
    out = np.empty_like(ref)
    assert f.read(out=out) is out and np.array_equal(out, ref)
    for i, row in enumerate(f):
        assert np.array_equal(row, ref[i])


for name, fmt in [("a.npy", "npy"), ("r0", "raid0"), ("r5", "raid5")]:
    with spools.open(os.path.join(d, name)) as f:
        assert f.format == fmt, (name, f.format)
        check(f, ref)
        # Also range by range (a striped file reads the covering range when it is small).
        spools._io._SMALL_SPAN_STRIPED, spools._io._SMALL_SPAN = 0, 0
        check(f, ref)
        spools._io._SMALL_SPAN_STRIPED, spools._io._SMALL_SPAN = 64 << 20, 256 << 10
    assert f.closed
    try:
        f[0]
    except ValueError as e:
        assert "closed" in str(e)
    else:
        raise AssertionError("read after close")

# A canonical file records nothing: bytes, or what the caller says it holds.
p = os.path.join(d, "a.bin")
with spools.open(p) as f:
    assert f.format == "canonical" and f.dtype == np.uint8 and f.shape == (ref.nbytes,)
    assert np.array_equal(f[8:16], ref.view(np.uint8).ravel()[8:16])
with spools.open(p, dtype=np.float64, shape=(29, 13)) as f:
    check(f, ref)
with spools.open(p, layout="f64[29,13] block,* on 3x1") as f:
    check(f, ref)
with spools.open(p, dtype="f8") as f:
    assert f.shape == (ref.size,) and np.array_equal(f[100:110], ref.ravel()[100:110])
for kw, word in [(dict(dtype="f8", shape=(29, 14)), "3016"), (dict(dtype="V7"), "7")]:
    try:
        spools.open(p, **kw)
    except ValueError as e:
        assert word in str(e), e
    else:
        raise AssertionError(kw)

# numpy's own .npy files: Fortran order, 3-d, other dtypes; many-run selections.
cube = (np.arange(6 * 7 * 50, dtype=np.int32) * 3).reshape(6, 7, 50)
for arr, name in [(cube, "cube.npy"), (np.asfortranarray(cube), "cubef.npy"),
                  (ref.astype(np.complex64), "c.npy")]:
    np.save(os.path.join(d, name), arr)
    with spools.open(os.path.join(d, name)) as f:
        assert f.order == ("F" if name == "cubef.npy" else "C")
        assert np.array_equal(f[()], arr)
        for k in [(slice(1, 5), slice(2, 6), slice(3, 40)), (slice(None), slice(None), 7),
                  (2, slice(None), slice(10, 11)), (slice(None), 3), (Ellipsis, slice(1, 3)),
                  (slice(0, 6), slice(0, 7), slice(0, 49))]:
            k = k[: arr.ndim]
            assert np.array_equal(f[k], arr[k]), (name, k)

# A 1 MiB cube: selections of up to 64 separate ranges spanning more than 256 KiB are
# read range by range, many short ranges spanning much more than they need too.
big = (np.arange(64 * 64 * 64, dtype=np.int32) * 5).reshape(64, 64, 64)
np.save(os.path.join(d, "big.npy"), big)
with spools.open(os.path.join(d, "big.npy")) as f:
    for k in [(slice(None), 5), (slice(None), slice(0, 60), 3), (slice(2, 60), slice(1, 3), slice(7, 9)),
              (Ellipsis, 63), (slice(None), slice(None), slice(0, 1))]:
        assert np.array_equal(f[k], big[k]), k

# What indexing refuses.
with spools.open(os.path.join(d, "a.npy")) as f:
    for k, exc, word in [
        (slice(0, 10, 2), ValueError, "step"), ([1, 2], TypeError, "list"),
        (np.array([1]), TypeError, "ndarray"), (None, TypeError, "NoneType"),
        (29, IndexError, "29"), (-30, IndexError, "-30"), ((0, 0, 0), IndexError, "too many"),
        ((Ellipsis, Ellipsis), IndexError, "ellipsis"), (True, TypeError, "boolean"),
    ]:
        try:
            f[k]
        except exc as e:
            assert word in str(e), (k, e)
        else:
            raise AssertionError("%r accepted" % (k,))
try:
    spools.open(os.path.join(d, "nothing"))
except FileNotFoundError as e:
    assert "nothing" in str(e)
else:
    raise AssertionError("missing file opened")
assert not spools.initialized()
print("open ok")
