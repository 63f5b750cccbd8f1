"""spools.Layout on one rank: properties, local shapes and extents against the numpy
reference (MPI darray rules), the plan summary against one computed from extents, and
the errors."""

import itertools
import pickle

import numpy as np

import spools
from layout_ref import global_array, part, part_from_extents

SPECS = [
    "f64[10,7] block,block on 2x2",
    "f64[10,7] block,cyclic(2) on 2x2",
    "i32[9,4,5] cyclic,*,block(3) on 3x1x2",
    "u8[17] cyclic(3) on 4",
    "c128[6,6] *,cyclic on 1x5 order=F",
    "f32[5,3] block,block on 1x1 order=F",
    "u16[7,8] block(4),cyclic(3) on 2x3",
]

for spec in SPECS:
    L = spools.Layout(spec)
    assert str(L) == spec and eval(repr(L), {"spools": spools}) == L, (str(L), repr(L))
    assert L == spools.Layout(L) and hash(L) == hash(spools.Layout(spec))
    glob = global_array(spec)
    assert L.dtype == glob.dtype and L.shape == glob.shape, (L.dtype, L.shape)
    assert L.itemsize == glob.itemsize and L.nbytes == glob.nbytes
    assert L.units == int(np.prod(L.grid))
    assert L.order == ("F" if "order=F" in spec else "C")
    assert pickle.loads(pickle.dumps(L)) == L
    assert [L.coords(u) for u in range(L.units)] == list(itertools.product(*map(range, L.grid)))
    seen = np.zeros(glob.size, dtype=int)
    for u in range(L.units):
        ref = part(glob, spec, u)
        assert L.local_shape(u) == ref.shape, (spec, u, L.local_shape(u), ref.shape)
        assert L.local_nbytes(u) == ref.nbytes
        got = part_from_extents(glob, L, u)
        assert np.array_equal(got, ref), (spec, u)
        for g, l, n in L.extents(u):
            seen[g : g + n] += 1
        assert [(g * L.itemsize, l * L.itemsize, n * L.itemsize) for g, l, n in L.extents(u)] == L.extents(u, bytes=True)
    assert (seen == 1).all(), spec  # every element on exactly one unit
    for bad in (-1, L.units):
        try:
            L.local_shape(bad)
        except ValueError as e:
            assert str(L.units - 1) in str(e), e
        else:
            raise AssertionError("unit %d accepted" % bad)

# The plan summary: bytes and runs from unit s to unit d, against the extents.
def pieces(L):
    """{global element: (unit, local element)} of an array layout."""
    out = {}
    for u in range(L.units):
        for g, l, n in L.extents(u):
            for k in range(n):
                out[g + k] = (u, l + k)
    return out

for a, b in [
    ("f64[10,7] block,block on 2x2", "f64[10,7] cyclic,* on 3x1"),
    ("i32[9,4,5] cyclic,*,block(3) on 3x1x2", "i32[9,4,5] block,block,* on 2x2x1"),
    ("u8[17] cyclic(3) on 4", "u8[17] block on 2"),
]:
    A, B = spools.Layout(a), spools.Layout(b)
    p = A.plan(B)
    assert p["from"] == a and p["to"] == b
    assert (p["src_units"], p["dst_units"]) == (A.units, B.units)
    assert p["total_bytes"] == A.nbytes and p["elem_size"] == A.itemsize
    pa, pb = pieces(A), pieces(B)
    nbytes = np.zeros((A.units, B.units), dtype=int)
    runs = np.zeros_like(nbytes)
    last = {}
    # Maximal runs: consecutive in source local order and destination local order.
    for s in range(A.units):
        prev = None
        order = sorted((l, g) for g, (u, l) in pa.items() if u == s)
        for l, g in order:
            d, dl = pb[g]
            nbytes[s, d] += A.itemsize
            if prev is None or prev[0] != d or prev[1] + 1 != dl or prev[2] + 1 != l:
                runs[s, d] += 1
            prev = (d, dl, l)
    assert p["bytes"] == nbytes.tolist(), (p["bytes"], nbytes)
    assert p["runs"] == runs.tolist(), (a, b, p["runs"], runs)
    assert p["total_runs"] == runs.sum()
    same = sum(nbytes[u, u] for u in range(min(A.units, B.units)))
    assert abs(p["local_share"] - same / A.nbytes) < 1e-12

# Byte-stream layouts.
S = spools.Layout("raid5(unit=1KiB,count=3,size=4KiB)")
assert S.dtype == np.uint8 and S.shape == (4096,) and S.units == 3 and S.grid == (3,)
assert S.order is None and S.local_shape(0) == (2048,)
assert spools.Layout("stripe(unit=1MiB,count=4)").shape is None

# Errors: specs that do not parse name the column; layouts of other datasets.
for bad, col in [("f64[10] blok on 2", "column 9"), ("f64[10,10] block on 2", "column"),
                 ("f64[10] block on 0", "column"), ("x", "column 1")]:
    try:
        spools.Layout(bad)
    except spools.LayoutError as e:
        assert isinstance(e, ValueError) and isinstance(e, spools.SpoolsError)
        assert col in str(e) and bad in str(e), str(e)
    else:
        raise AssertionError("%r parsed" % bad)
try:
    spools.Layout(42)
except TypeError as e:
    assert "int" in str(e), e
else:
    raise AssertionError("42 accepted")
try:
    spools.Layout("f64[10,7] block,* on 2x1").plan("f64[10,8] block,* on 2x1")
except spools.LayoutError as e:
    assert "560" in str(e) and "640" in str(e), e
else:
    raise AssertionError("plan of two datasets")
print("layout checks ok")
