"""The object collectives (picklable objects, mpi4py's lower-case forms: bcast, gather,
scatter, allgather, alltoall, reduce, allreduce), small and large,
from every root; and the array collectives' mismatch across ranks when asked
(argv[1] == "mismatch"): sizes that differ between ranks, uncaught, end the job with
the runtime's message instead of hanging."""

import sys

import numpy as np
import spools

world = spools.init()
r, n = world.rank, world.size

if sys.argv[1:] == ["mismatch"]:
    world.Allgather(np.zeros(3 + r))  # ranks disagree: raised on some rank, uncaught
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
    got = world.bcast(mine, root=root)
    same(got, obj(root))
    if r == root:
        assert got is mine, "the root gets its own object back"
    got = world.gather(obj(r), root=root)
    if r == root:
        assert isinstance(got, list) and len(got) == n
        for i in range(n):
            same(got[i], obj(i))
    else:
        assert got is None
    got = world.scatter([obj(10 + i) for i in range(n)] if r == root else None, root=root)
    same(got, obj(10 + r))
got = world.allgather(obj(r))
for i in range(n):
    same(got[i], obj(i))
# Large (2 MB) and empty-ish objects.
big = world.bcast(np.full(250_000, 3.0) if r == 0 else None)
assert big.shape == (250_000,) and (big == 3.0).all()
assert world.allgather(None) == [None] * n
assert world.gather(b"x" * (r * 100_000), root=0) in (None, [b"x" * (i * 100_000) for i in range(n)])
# alltoall: rank j gets [rank i's objs[j] for every i].
got = world.alltoall([(r, j, "x" * (1000 * r * j)) for j in range(n)])
assert got == [(i, r, "x" * (1000 * i * r)) for i in range(n)], got
# A sequence of the wrong length: that rank's error, a ValueError naming it elsewhere.
try:
    world.alltoall([r] * (n + 1 if r == n - 1 else n))
    raise AssertionError("no error")
except ValueError as e:
    want = "one object per rank" if r == n - 1 else "rank %d" % (n - 1)
    assert want in str(e), e
# Object reductions, in rank order (non-commutative: lists concatenate).
for root in sorted({0, n - 1}):
    got = world.reduce([r], root=root)
    assert got == (list(range(n)) if r == root else None), got
assert world.allreduce(r) == n * (n - 1) // 2
assert world.allreduce(r + 1, op=spools.PROD) == np.prod(np.arange(1, n + 1))
assert world.allreduce(r, op="max") == n - 1 and world.allreduce(r, op="MIN") == 0
assert world.allreduce(str(r), op=lambda a, b: a + "," + b) == ",".join(map(str, range(n)))
assert world.allreduce(r, op=spools.Op(lambda a, b: 10 * a + b)) == int("".join(map(str, range(n))))
assert np.array_equal(world.allreduce(np.full(3, r)), np.full(3, n * (n - 1) // 2))
# A wrong operator: raised after the collective, on every rank; then all goes on.
for op in ("avg", 42):
    try:
        world.allreduce(r, op=op)
        raise AssertionError("no error")
    except (TypeError, ValueError) as e:
        assert "op must be" in str(e), e
assert world.allreduce(1) == n
world.barrier()
print("coll_obj ok")
