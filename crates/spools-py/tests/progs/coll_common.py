"""What the coll test programs share: every rank's deterministic input (so each rank
computes the reference of a collective itself) and the numpy references."""

import numpy as np

DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float32, np.float64]
MOVE_DTYPES = DTYPES + [np.complex64, np.complex128, np.dtype([("a", "<i4"), ("b", "<f8")])]


def inp(r, dtype, shape, salt=0):
    """Rank r's input: small integers (so that float sums are exact in any order)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    base = (np.arange(n, dtype=np.int64) * 7 + r * 13 + salt * 5) % 11
    if dtype == np.bool_:
        return ((base + r) % 3 == 0).reshape(shape)
    if dtype.kind == "c":
        return (base + 1j * ((base + r) % 5)).astype(dtype).reshape(shape)
    if dtype.fields is not None:
        out = np.zeros(n, dtype=dtype)
        out["a"] = base + r
        out["b"] = base * 0.5 - r
        return out.reshape(shape)
    if dtype.kind == "i":
        base = base - 5
    return base.astype(dtype).reshape(shape)


def stack(n, dtype, shape, upto=None, salt=0):
    """Every rank's input, stacked (ranks 0 to upto - 1)."""
    return np.stack([inp(r, dtype, shape, salt) for r in range(n if upto is None else upto)])


def ref(op, s):
    """The reduction of stack `s` over its first axis, as numpy computes it (wrapping
    integers, booleans as logical or/and)."""
    dt = s.dtype
    if dt == np.bool_:
        f = {"sum": np.logical_or, "prod": np.logical_and, "min": np.minimum, "max": np.maximum}[op]
    else:
        f = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[op]
    acc = s[0].copy()
    for x in s[1:]:
        acc = f(acc, x).astype(dt)
    return acc


def same(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype, "%s: dtype %s, want %s" % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (what, got.shape, want.shape)
    assert np.array_equal(got, want), "%s:\n%r\nwant\n%r" % (what, got, want)
