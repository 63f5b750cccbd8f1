"""The object collectives (picklable objects, mpi4py's lower-case forms), small and large,
from every root; and the array collectives' mismatch across ranks when asked
(argv[1] == "mismatch"): sizes that differ between ranks, uncaught, end the job with
the runtime's message instead of hanging."""

import sys

import numpy as np
import spools

world = spools.init()
r, n = world.rank, world.size

if sys.argv[1:] == ["mismatch"]:
    world.allgather(np.zeros(3 + r))  # ranks disagree: raised on some rank, uncaught
    print("no error")
    sys.exit(0)


def obj(i):
    return {"rank": i, "name": "rank %d" % i, "data": np.arange(i + 1) * 1.5, "t": (i, [i] * i)}


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert np.array_equal(a[k], b[k]), (a, b)
        else:
            assert a[k] == b[k], (a, b)


for root in sorted({0, n - 1}):
    mine = obj(r)
    got = world.bcast_obj(mine, root=root)
    same(got, obj(root))
    if r == root:
        assert got is mine, "the root gets its own object back"
    got = world.gather_obj(obj(r), root=root)
    if r == root:
        assert isinstance(got, list) and len(got) == n
        for i in range(n):
            same(got[i], obj(i))
    else:
        assert got is None
    got = world.scatter_obj([obj(10 + i) for i in range(n)] if r == root else None, root=root)
    same(got, obj(10 + r))
got = world.allgather_obj(obj(r))
for i in range(n):
    same(got[i], obj(i))
# Large (2 MB) and empty-ish objects.
big = world.bcast_obj(np.full(250_000, 3.0) if r == 0 else None)
assert big.shape == (250_000,) and (big == 3.0).all()
assert world.allgather_obj(None) == [None] * n
assert world.gather_obj(b"x" * (r * 100_000), root=0) in (None, [b"x" * (i * 100_000) for i in range(n)])
world.barrier()
print("coll_obj ok")
