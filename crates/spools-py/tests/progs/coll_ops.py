"""Reductions with a Python callable on whole arrays: a non-commutative one (2x2 integer
matrix products, in rank order) through every reduction, blocking and not; a commutative
one (spools.Op(..., commute=True)) on a long array; an exception raised inside the
callable comes out of the call on the ranks that called it, and a result of the wrong
dtype or shape is a TypeError/ValueError; afterwards the communicator still works."""

import sys

import numpy as np
import spools
from coll_common import same

world = spools.init()
r, n = world.rank, world.size


def mat(rank, k):
    """Rank `rank`'s k matrices [[rank + i + 1, 1], [i % 3, 1]] (uint64 arithmetic wraps,
    as numpy's matmul of uint64 does)."""
    return np.stack([np.array([[rank + i + 1, 1], [i % 3, 1]], dtype=np.uint64) for i in range(k)])


def chain(ms):
    acc = ms[0]
    for m in ms[1:]:
        acc = acc @ m
    return acc


calls = []


def matmul(a, b):
    calls.append((a.shape, b.shape))
    assert a.dtype == np.uint64 and b.dtype == np.uint64, (a.dtype, b.dtype)
    return a @ b


for k in [1, 3]:
    mine = mat(r, k)
    want = chain([mat(i, k) for i in range(n)])
    assert n == 1 or not np.array_equal(want, chain([mat(i, k) for i in reversed(range(n))])), \
        "the test's operator must not commute"
    calls.clear()
    same(world.Allreduce(mine, op=matmul), want, "allreduce of a callable")
    # Whole arrays of the input's shape, every time.
    assert all(s == ((k, 2, 2), (k, 2, 2)) for s in calls), calls
    for root in sorted({0, n - 1}):
        got = world.Reduce(mine, op=matmul, root=root)
        if r == root:
            same(got, want, "reduce of a callable to %d" % root)
    same(world.Scan(mine, op=matmul), chain([mat(i, k) for i in range(r + 1)]), "scan of a callable")
    b = mine.copy()
    world.Allreduce(b, op=spools.Op(matmul), out=b)
    same(b, want, "in-place allreduce of an Op")
    same(world.Iallreduce(mine, op=matmul).wait(), want, "iallreduce of a callable")
    same(world.Iscan(mine, op=matmul).wait(), chain([mat(i, k) for i in range(r + 1)]), "iscan")
    got = world.Ireduce(mine, op=matmul, root=n - 1).wait()
    if r == n - 1:
        same(got, want, "ireduce of a callable")
    else:
        assert got is None

# Reduce-scatter with a callable: block i (i + 1 rows of 2x2 matrices) to rank i.
counts = list(range(1, n + 1))
total = sum(counts)
want = chain([mat(i, total) for i in range(n)])
d = sum(counts[:r])
same(world.Reduce_scatter(mat(r, total), counts, op=matmul), want[d : d + r + 1], "reduce_scatter")
same(world.Ireduce_scatter(mat(r, total), counts, op=matmul).wait(), want[d : d + r + 1], "ireduce_scatter")

# A commutative operator on 300 kB: the runtime may combine blocks (1-D pieces).
pieces = []


def add(a, b):
    pieces.append(a.size)
    return a + b


big = np.arange(40_000, dtype=np.float64) + r
op = spools.Op(add, commute=True)
assert op.commute and "commute=True" in repr(op)
same(world.Allreduce(big, op=op), np.arange(40_000, dtype=np.float64) * n + n * (n - 1) / 2, "commutative")
assert n == 1 or len(pieces) > 0

# Complex numbers through a callable (bytes carried, the function sees complex128).
z = np.array([1 + 1j * r, 2 - r * 1j])
same(world.Allreduce(z, op=lambda a, b: a * b), np.prod([[1 + 1j * i, 2 - i * 1j] for i in range(n)], axis=0), "complex product")


class Boom(Exception):
    pass


def boom(a, b):
    called.append(1)
    raise Boom("boom on rank %d" % r)


# An exception inside the callable: raised by the call on every rank that called it;
# the collective still ends on every rank. The calls then raise on every rank (the
# non-blocking ones through the agreement the runtime appends to the collective): the
# others a SpoolsError naming a rank whose function raised (their result would be
# wrong).
for name, call in [
    ("allreduce", lambda: world.Allreduce(np.ones(3), op=boom)),
    ("reduce", lambda: world.Reduce(np.ones(3), op=boom, root=0)),
    ("scan", lambda: world.Scan(np.ones(3), op=boom)),
    ("iallreduce", lambda: world.Iallreduce(np.ones(3), op=boom).wait()),
    ("ireduce", lambda: world.Ireduce(np.ones(3), op=boom, root=0).wait()),
    ("ireduce_scatter", lambda: world.Ireduce_scatter(np.ones((2 * n, 3)), op=boom).wait()),
    ("iscan", lambda: world.Iscan(np.ones(3), op=boom).wait()),
]:
    called = []
    try:
        call()
        raised = False
    except Boom as e:
        assert "boom on rank %d" % r in str(e)
        raised = True
    except spools.errors.SpoolsError as e:
        assert not called, "%s: %r" % (name, e)
        assert "reduction function raised" in str(e), repr(e)
        raised = "other"
    assert (raised is True) == bool(called), "%s: raised %s, called %d times" % (name, raised, len(called))
    assert len(called) <= 1, "%s: the callable ran again after its exception" % name
    ncalled = world.Allreduce(np.array([len(called)]))[0]
    nraised = world.Allreduce(np.array([int(raised is not False)]))[0]
    assert nraised >= (1 if n > 1 else 0), "%s: no rank raised" % name
    if ncalled > 0:
        assert nraised == n, "%s: %d ranks raised of %d" % (name, nraised, n)

# The function raises on one rank only (the last one that calls it): every rank raises,
# none keeps a result spoiled by the failed combination.
for name, call, want in [
    ("allreduce", lambda f: world.Allreduce(np.array([float(r + 1)]), op=f), n * (n + 1) / 2),
    ("scan", lambda f: world.Scan(np.array([float(r + 1)]), op=f), (r + 1) * (r + 2) / 2),
    ("iallreduce", lambda f: world.Iallreduce(np.array([float(r + 1)]), op=f).wait(), n * (n + 1) / 2),
    ("ireduce", lambda f: world.Ireduce(np.array([float(r + 1)]), op=f, root=0).wait(),
     n * (n + 1) / 2 if r == 0 else None),
    ("iscan", lambda f: world.Iscan(np.array([float(r + 1)]), op=f).wait(), (r + 1) * (r + 2) / 2),
    ("ireduce_scatter",
     lambda f: world.Ireduce_scatter(np.full(n, float(r + 1)), op=f).wait(), n * (n + 1) / 2),
]:
    called = []

    def count(a, b):
        called.append(1)
        return a + b

    call(count)
    last = max(world.Allgather(np.array([r if called else -1])).ravel())
    hit = []

    def boom_last(a, b):
        if r == last:
            hit.append(1)
            raise Boom("boom on rank %d" % r)
        return a + b

    try:
        got = call(boom_last)
    except Boom:
        got = "boom"
    except spools.errors.SpoolsError as e:
        assert "rank %d's reduction function raised" % last in str(e), repr(e)
        got = "other"
    if last < 0:
        # No rank called the function: a valid result.
        assert (got is None and want is None) or list(got) == [want], (name, got)
    else:
        assert got == ("boom" if r == last else "other"), (name, r, last, got)

# A result of the wrong dtype or shape: TypeError / ValueError naming both, on the ranks
# that called the function.
for bad, kind, words in [
    (lambda a, b: (a + b).astype(np.float32), TypeError, ["float64", "float32"]),
    (lambda a, b: np.concatenate([a, b]), ValueError, ["(4,)", "(8,)"]),
]:
    called = []
    try:
        world.Allreduce(np.ones(4), op=lambda a, b: called.append(1) or bad(a, b))
        raised = None
    except (TypeError, ValueError) as e:
        raised = e
    except spools.errors.SpoolsError as e:
        assert not called and "reduction function raised" in str(e), repr(e)
        raised = None
    assert (raised is not None) == bool(called), "wrong result: %r, called %d" % (raised, len(called))
    if raised is not None:
        assert isinstance(raised, kind) and all(w in str(raised) for w in words), repr(raised)
    assert world.Allreduce(np.array([int(raised is not None)]))[0] >= (1 if n > 1 else 0)

# The communicator still works.
same(world.Allreduce(np.array([r])), np.array([n * (n - 1) // 2]), "after the errors")
world.barrier()
print("coll_ops ok")
