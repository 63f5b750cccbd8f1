"""No copies through Python objects: redistributing, writing and reading a 16 MiB array
allocate (as tracemalloc sees Python's and numpy's allocations) only the new result
array, or nothing at all with `out=`; the input is read in place."""

import os
import sys
import tracemalloc

import numpy as np

import spools

world = spools.init()
P, me = world.size, world.rank
N = 1024  # f64[1024,2048]: 16 MiB in all
src = spools.Layout("f64[%d,2048] block,* on %dx1" % (N, P))
dst = spools.Layout("f64[%d,2048] cyclic,* on %dx1" % (N, P))
a = np.full(src.local_shape(me), float(me))
out = np.empty(dst.local_shape(me))
MiB = 1 << 20


def peak(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    r = fn()
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return r, top


b, top = peak(lambda: world.redistribute(a, src, dst))
# The new array, and nothing the size of the input.
assert b.nbytes <= top < b.nbytes + MiB, (top, b.nbytes)
r, top = peak(lambda: world.redistribute(a, src, dst, out=out))
assert r is out and top < MiB, top
assert np.array_equal(out, b)
path = os.path.join(sys.argv[1], "z.npy")
st, top = peak(lambda: world.write_file(path, a, src, sync=False))
assert st["bytes"] == N * 2048 * 8 and top < MiB, top
r, top = peak(lambda: world.read_file(path, src, out=a))
assert r is a and top < MiB, top
print("zero copy ok")
