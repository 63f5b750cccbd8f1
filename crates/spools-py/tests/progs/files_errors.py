"""Parallel-file errors on every rank count: a file of another dataset (LayoutError), a
missing file, a part of the wrong dtype or size on one rank (every rank raises that
rank's class: nobody hangs), a bad format or unit directory (ValueError)."""

import os
import sys

import numpy as np

import spools
from layout_ref import global_array, part

world = spools.init()
d = sys.argv[1]
P, me = world.size, world.rank
spec = "f64[29,13] block,* on %dx1" % P
mine = part(global_array(spec, seed=3), spec, me)


def expect(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return e
    raise AssertionError("no %s" % exc.__name__)


path = os.path.join(d, "e.npy")
world.write_file(path, mine, spec)
# The file holds f64[29,13]; readers describing another dataset are refused (rank 0
# finds out; every rank raises LayoutError).
expect(spools.LayoutError, lambda: world.read_file(path, "f32[29,26] block,* on %dx1" % P), "29, 13")
expect(spools.LayoutError, lambda: world.read_file(path, "f64[29,14] block,* on %dx1" % P))
# A missing file: rank 0 looks first; every rank raises its FileNotFoundError.
e = expect(FileNotFoundError, lambda: world.read_file(os.path.join(d, "nothing"), spec), "nothing")
assert me == 0 or "rank 0" in str(e), e
# A wrong dtype on the last rank, a wrong size on rank 0: that rank's class everywhere.
bad = mine.astype(np.int64) if me == P - 1 else mine
expect(TypeError, lambda: world.write_file(path, bad, spec), "int64", "float64")
bad = np.zeros(mine.size + 3) if me == 0 else mine
e = expect(ValueError, lambda: world.write_file(path, bad, spec), "has %d elements" % bad.size if me == 0 else "rank 0")
assert me != 0 or str(mine.shape) in str(e), e
out = np.empty(mine.size - 1) if me == 0 else None
expect(ValueError, lambda: world.read_file(path, spec, out=out), "out")
# Arguments every rank gets wrong the same way.
expect(ValueError, lambda: world.write_file(path, mine, spec, format="raid6(unit=1KiB,count=3)"), "raid6")
expect(ValueError, lambda: world.write_file(path, mine, spec, format="raid5(unit=1KiB)"), "count")
expect(ValueError, lambda: world.write_file(os.path.join(d, "x"), mine, spec, format="raid0(unit=1KiB,count=2)", dirs=["/"]))
expect(spools.LayoutError, lambda: world.write_file(path, mine, "f64[29,13] block,* on %dx1" % (P + 1)), "units")
# The file is still the first one written, whole.
assert np.array_equal(world.read_file(path, spec), mine)
print("errors ok")
