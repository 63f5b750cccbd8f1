"""Comm.alloc: numpy arrays in the shared heap. Every rank allocates, checks shape,
dtype and zeros, redistributes heap -> heap (single copy), heap -> ordinary and
ordinary -> heap against the numpy reference, then frees its arrays and checks that the
segments left /dev/shm. Prints "heap ok"."""

import gc
import os

import numpy as np

import spools
from layout_ref import global_array, part

SRC = "f64[61,40] block,* on 3x1 order=F"
DST = "f64[61,40] *,cyclic(3) on 1x3"
SRC_I = "i32[7,9,11] cyclic(2),*,* on 3x1x1"
DST_I = "i32[7,9,11] *,*,block on 1x1x3"

world = spools.init()
me = world.rank

a = world.alloc(spools.Layout(SRC).local_shape(me))
assert a.dtype == np.float64 and a.shape == spools.Layout(SRC).local_shape(me), (a.dtype, a.shape)
assert not a.any() and a.flags.c_contiguous and a.flags.writeable
block = a
while isinstance(block, np.ndarray):
    block = block.base
assert type(block).__name__ == "HeapBlock", type(block)
seg = repr(block).split()[3]
assert os.path.exists("/dev/shm/" + seg), seg

for src, dst in [(SRC, DST), (SRC_I, DST_I)]:
    want = part(global_array(dst, seed=5), dst, me)
    mine = part(global_array(src, seed=5), src, me)
    h_in = world.alloc(mine.shape, mine.dtype, order="F" if "order=F" in src else "C")
    h_in[...] = mine
    # heap -> heap, heap -> ordinary, ordinary -> heap
    h_out = world.alloc(want.shape, want.dtype)
    assert world.redistribute(h_in, src, dst, out=h_out) is h_out
    assert np.array_equal(h_out, want), (src, "heap -> heap")
    assert np.array_equal(world.redistribute(h_in, src, dst), want), (src, "heap -> ordinary")
    h_out2 = world.alloc(want.shape, want.dtype)
    plain = np.asfortranarray(mine) if "order=F" in src else np.ascontiguousarray(mine)
    world.redistribute(plain, src, dst, out=h_out2)
    assert np.array_equal(h_out2, want), (src, "ordinary -> heap")

# A view keeps the segment; the last one frees it.
v = a[1:]
del a, block
gc.collect()
assert os.path.exists("/dev/shm/" + seg)
del v, h_in, h_out, h_out2
gc.collect()
assert not os.path.exists("/dev/shm/" + seg), seg

# Bad arguments.
for bad, exc in [((-1,), TypeError), ("x", TypeError), ((2, 3), None)]:
    try:
        world.alloc(bad, object if exc is None else "f8")
    except (TypeError, ValueError) as e:
        assert exc is None or isinstance(e, exc), (bad, e)
    else:
        raise AssertionError(f"alloc({bad!r}) did not raise")
try:
    world.alloc((1 << 62, 1 << 62))
except ValueError:
    pass
else:
    raise AssertionError("an overflowing alloc did not raise")
f = world.alloc((4, 5), np.complex64, order="F")
assert f.flags.f_contiguous and not f.flags.c_contiguous and f.dtype == np.complex64
try:
    world.alloc(3, order="K")
except ValueError:
    pass
else:
    raise AssertionError("order K did not raise")
assert world.alloc(0).shape == (0,) and world.alloc((3, 0), "u8").size == 0
world.barrier()
print("heap ok")
