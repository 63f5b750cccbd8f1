"""Comm.redistribute on every rank count: each rank's part of a global array moved
between two layouts, checked against the numpy reference; `out=` filled in place; the
argument errors (the faulty rank's class on every rank, no hang)."""

import numpy as np

import spools
from layout_ref import global_array, part

world = spools.init()
P, me = world.size, world.rank


def pairs(P):
    g = {1: (1, 1), 2: (1, 2), 3: (3, 1), 4: (2, 2), 5: (5, 1)}[P]
    return [
        ("f64[13,11] block,block on %dx%d" % g, "f64[13,11] cyclic(2),* on %dx1" % P),
        ("i32[40] cyclic on %d" % P, "i32[40] block on %d" % P),
        ("c128[6,9] block,* on %dx1" % P, "c128[6,9] *,cyclic on 1x%d order=F" % P),
        # Fewer units than ranks: the others hold (and get) nothing.
        ("f64[13,11] block,* on 1x1", "f64[13,11] *,cyclic on 1x%d" % P),
        ("u16[5,4,3] *,block,cyclic on 1x1x%d order=F" % P, "u16[5,4,3] block,*,* on 1x1x1"),
    ]


for src, dst in pairs(P):
    glob = global_array(src)
    a = part(glob, src, me)
    b = world.redistribute(a, src, dst)
    want = part(glob, spools.Layout(dst), me) if False else part(glob, dst, me)
    assert b.dtype == want.dtype and b.shape == want.shape, (src, dst, b.dtype, b.shape, want.shape)
    assert np.array_equal(b, want), (src, dst, me)
    if "order=F" in dst and b.ndim > 1 and b.size > 1:
        assert b.flags.f_contiguous
    # out=: filled in place (the same object, the same memory) and returned.
    out = np.zeros_like(want, order="F" if "order=F" in dst else "C")
    ptr = out.__array_interface__["data"][0]
    r = world.redistribute(a, spools.Layout(src), spools.Layout(dst), out=out)
    assert r is out and out.__array_interface__["data"][0] == ptr
    assert np.array_equal(out, want)

# A byte stream takes its size from the array; bytearray and memoryview buffers.
src, dst = "u8[100] block on %d" % P, "stripe(unit=16B,count=%d)" % P
glob = np.arange(100, dtype=np.uint8)
mine = bytearray(part(glob, src, me).tobytes())
got = world.redistribute(memoryview(mine), src, dst)
want = np.concatenate([glob[k : k + 16] for k in range(16 * me, 100, 16 * P)] or [glob[:0]])
assert np.array_equal(got, want), (got, want)

# A sub-communicator (duplicated for the call).
sub = world.split(me % 2)
spec_a, spec_b = "f32[7,6] block,* on %dx1" % sub.size, "f32[7,6] *,block on 1x%d" % sub.size
glob = global_array(spec_a, seed=me % 2)
b = sub.redistribute(part(glob, spec_a, sub.rank), spec_a, spec_b)
assert np.array_equal(b, part(glob, spec_b, sub.rank))


def expect(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return e
    raise AssertionError("no %s" % exc.__name__)


src, dst = "f64[13,11] block,* on %dx1" % P, "f64[13,11] *,block on 1x%d" % P
glob = global_array(src)
good = part(glob, src, me)
# Layouts of two datasets, too many units: LayoutError on every rank, before any message.
expect(spools.LayoutError, lambda: world.redistribute(good, src, "f64[13,12] *,block on 1x%d" % P), "1144", "1248")
expect(spools.LayoutError, lambda: world.redistribute(good, src, "f64[13,11] *,block on 1x%d" % (P + 1)), "units")
expect(spools.LayoutError, lambda: world.redistribute(good, src, "f64[13,11] *,blok on 1x1"), "column")
# A wrong dtype on rank 0: TypeError naming both, on every rank (the others name rank
# 0), and nobody hangs.
bad = good.astype(np.float32) if me == 0 else good
e = expect(TypeError, lambda: world.redistribute(bad, src, dst), "float32", "float64")
assert me == 0 or "rank 0" in str(e), e
# A wrong size on the last rank: ValueError naming the local shape, on every rank.
bad = np.zeros(good.size + 1) if me == P - 1 else good
e = expect(ValueError, lambda: world.redistribute(bad, src, dst), "has %d elements" % bad.size if me == P - 1 else "elements")
assert me != P - 1 or str(good.shape) in str(e), e
assert me == P - 1 or "rank %d" % (P - 1) in str(e), e
# Non-contiguous input, read-only out, out sharing memory with a.
if P == 1:
    expect(ValueError, lambda: world.redistribute(np.zeros((13, 22))[:, ::2], src, dst), "C-contiguous")
    ro = np.zeros((13, 11))
    ro.flags.writeable = False
    expect(ValueError, lambda: world.redistribute(good, src, dst, out=ro), "read-only")
    expect(ValueError, lambda: world.redistribute(good, src, dst, out=good), "shares memory")
# After all that, the next call works.
b = world.redistribute(good, src, dst)
assert np.array_equal(b, part(glob, dst, me))
print("redistribute ok")
