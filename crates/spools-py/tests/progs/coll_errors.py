"""Wrong arguments of the collectives: each a TypeError/ValueError naming the expected
and the given, raised on every rank alike where the ranks exchange their arguments
first (scatters, v-forms), never a hang; the communicator works afterwards."""

import numpy as np
import spools

world = spools.init()
r, n = world.rank, world.size


def expect(kind, words, f, where=True):
    """f() raises `kind` with every one of `words` in its message (on the ranks where
    `where` holds; elsewhere it must not raise)."""
    try:
        f()
    except kind as e:
        assert where, "unexpected %r" % (e,)
        msg = str(e)
        for w in words:
            assert w in msg, "%r not in %r" % (w, msg)
        return
    assert not where, "no %s raised (%s)" % (kind.__name__, words)


# Scatter: the root's array must have first axis == size; every rank raises.
expect(ValueError, ["first axis == size %d" % n, "(%d, 2)" % (n + 1)],
       lambda: world.Scatter(np.zeros((n + 1, 2)) if r == 0 else None, root=0))
expect(ValueError, ["root must give the array"], lambda: world.Scatter(None, root=0))
expect(ValueError, ["add up to", str(n)],
       lambda: world.Scatterv(np.zeros(n) if r == n - 1 else None, [2] * n if r == n - 1 else None, root=n - 1))
expect(ValueError, ["one count per rank (%d)" % n],
       lambda: world.Scatterv(np.zeros(n) if r == 0 else None, [1] * (n + 1) if r == 0 else None))
# v-forms: a dtype or row shape differing on one rank is a ValueError on every rank.
if n > 1:
    expect(ValueError, ["same dtype and row shape", "float64", "int32"],
           lambda: world.Gatherv(np.zeros((r + 1, 2), dtype=np.int32 if r == n - 1 else np.float64)))
    expect(ValueError, ["same dtype and row shape", "(3,)", "(2,)"],
           lambda: world.Allgatherv(np.zeros((1, 3 if r == 0 else 2))))
    expect(ValueError, ["sendcounts", "one count per rank"],
           lambda: world.Alltoallv(np.zeros(n), [1] * (n + 1) if r == 1 else [1] * n))
expect(ValueError, ["at least one axis", "0-d"], lambda: world.Allgatherv(np.float64(1.0)))
expect(ValueError, ["add up to", "(5,)"], lambda: world.Alltoallv(np.zeros(5), [6] + [0] * (n - 1)))
# Local shapes: Alltoall's first axis, Reduce_scatter's counts.
expect(ValueError, ["communicator's size %d" % n, "(%d, 3)" % (n + 1)],
       lambda: world.Alltoall(np.zeros((n + 1, 3))))
expect(ValueError, ["split evenly", "(%d,)" % (2 * n + 1)],
       lambda: world.Reduce_scatter(np.zeros(2 * n + 1)), where=n > 1)
expect(ValueError, ["add up to"], lambda: world.Reduce_scatter(np.zeros(n), [2] * n))
# out= of the wrong dtype, shape, or read-only.
expect(TypeError, ["dtype float64", "int32"], lambda: world.Allreduce(np.zeros(3), out=np.zeros(3, dtype=np.int32)))
expect(ValueError, ["shape (3,)", "(4,)"], lambda: world.Allreduce(np.zeros(3), out=np.zeros(4)))
expect(ValueError, ["shape (%d, 3)" % n, "(3,)"], lambda: world.Allgather(np.zeros(3), out=np.zeros(3)))
ro = np.zeros(3)
ro.flags.writeable = False
expect(ValueError, ["read-only"], lambda: world.Allreduce(np.zeros(3), out=ro))
expect(ValueError, ["read-only"], lambda: world.Bcast(ro))
a = np.zeros(6)
expect(ValueError, ["overlaps"], lambda: world.Allreduce(a[:4], out=a[2:]))
# Non-contiguous arrays.
expect(ValueError, ["C-contiguous", "strides"], lambda: world.Allreduce(np.zeros((4, 4))[:, ::2]))
# Operators.
expect(ValueError, ["op must be one of", "'avg'".replace("'", '"')], lambda: world.Allreduce(np.zeros(2), op="avg"))
expect(TypeError, ["op must be one of", "int"], lambda: world.Allreduce(np.zeros(2), op=42))
expect(TypeError, ["complex"], lambda: world.Allreduce(np.zeros(2, dtype=np.complex128), op="max"))
expect(TypeError, ["numeric dtype"], lambda: world.Allreduce(np.zeros(2, dtype="U3")))
expect(TypeError, ["callable"], lambda: spools.Op(3))
# Roots.
expect(ValueError, ["root", "0 to %d" % (n - 1), str(n)], lambda: world.Bcast(np.zeros(1), root=n))
expect(ValueError, ["root", "-1"], lambda: world.Reduce(np.zeros(1), root=-1))
# Not buffers.
expect(TypeError, ["buffer protocol", "dict"], lambda: world.Allreduce({"a": 1}))
expect(TypeError, ["dtype object"], lambda: world.Allgather(np.array([None, 1], dtype=object)))
# Objects that do not pickle: their rank raises the pickling error, the others a
# ValueError naming it.
import threading

lock = threading.Lock()
if n > 1:
    try:
        world.allgather(lock if r == 1 else r)
        got = None
    except Exception as e:
        got = e
    if r == 1:
        assert isinstance(got, TypeError) and "pickle" in str(got), repr(got)
    else:
        assert isinstance(got, ValueError) and "rank 1" in str(got), repr(got)
    if r == 0:
        expect(TypeError, ["pickle"], lambda: world.bcast(lock, root=0))
    else:
        expect(ValueError, ["rank 0's object could not be pickled"], lambda: world.bcast(None, root=0))
# A wrong out= on one rank only: checked before the ranks agree where it can be (the same
# ValueError on every rank), else that rank alone raises once the collective ended; the
# next collective is not confused either way.
expect(ValueError, ["Gatherv", "shape (total rows,) + (2,)", "(3,)"],
       lambda: world.Gatherv(np.ones((r + 1, 2)), root=0, out=np.empty(3) if r == 0 else None))
assert world.Allreduce(np.array([r + 1.0]))[0] == n * (n + 1) / 2
rows = n * (n + 1) // 2
expect(ValueError, ["Allgatherv", "out must have shape (%d, 2)" % rows, "(%d, 2)" % (rows + 1)],
       lambda: world.Allgatherv(np.ones((r + 1, 2)), out=np.empty((rows + 1, 2)) if r == n - 1 else None),
       where=r == n - 1)
assert world.Allreduce(np.array([r + 2.0]))[0] == n * (n + 3) / 2
expect(ValueError, ["Gather", "out must have shape"],
       lambda: world.Gather(np.ones(2), root=0, out=np.empty(1) if r == 0 else None), where=r == 0)
assert world.Allreduce(np.array([r + 3.0]))[0] == n * (n + 5) / 2
expect(TypeError, ["Reduce", "dtype float64", "int64"],
       lambda: world.Reduce(np.ones(2), root=n - 1, out=np.empty(2, dtype=np.int64) if r == n - 1 else None),
       where=r == n - 1)
assert world.Bcast(np.array([7.0]) if r == 0 else np.zeros(1))[0] == 7.0
expect(ValueError, ["Scatter", "out must have shape"],
       lambda: world.Scatter(np.ones((n, 2)) if r == 0 else None, out=np.empty(3) if r == n - 1 else None),
       where=r == n - 1)
expect(ValueError, ["Alltoallv", "out must have shape"],
       lambda: world.Alltoallv(np.ones((n, 2)), [1] * n, out=np.empty(2) if r == 0 else None))
assert world.Allreduce(np.array([r + 4.0]))[0] == n * (n + 7) / 2
# A non-blocking collective with a wrong out= on one rank: its wait() raises there, once
# the collective ended on every rank.
expect(ValueError, ["Iallreduce", "shape (3,)", "(4,)"],
       lambda: world.Iallreduce(np.ones(3), out=np.zeros(4) if r == 0 else None).wait(), where=r == 0)
expect(ValueError, ["Iallgather", "out must have shape"],
       lambda: world.Iallgather(np.ones(2), out=np.zeros(1) if r == n - 1 else None).wait(), where=r == n - 1)
assert world.Allreduce(np.array([r + 5.0]))[0] == n * (n + 9) / 2
# Counts whose sums or byte sizes overflow: a ValueError, never a panic or a wrap.
big = [2**63 - 1] * (n - 1) + [6]
if n > 2:  # two int64 counts cannot overflow a 64-bit sum
    expect(ValueError, ["counts", "add up to more"], lambda: world.Reduce_scatter(np.ones(4), counts=big))
    expect(ValueError, ["counts", "add up to more"],
           lambda: world.Scatterv(np.ones(4) if r == 0 else None, counts=big if r == 0 else None, root=0))
    expect(ValueError, ["sendcounts", "add up to more"], lambda: world.Alltoallv(np.ones(4), sendcounts=big))
# The communicator works afterwards.
assert world.Allreduce(np.array([1]))[0] == n
world.barrier()
# After finalize, every collective raises FinalizedError (the runtime is gone).
req = world.Iallreduce(np.ones(2))
req.wait()
world.finalize()
for name, f in [
    ("Allreduce", lambda: world.Allreduce(np.ones(3))),
    ("Bcast", lambda: world.Bcast(np.ones(3))),
    ("Gatherv", lambda: world.Gatherv(np.ones((1, 2)))),
    ("Iallreduce", lambda: world.Iallreduce(np.ones(3))),
    ("bcast", lambda: world.bcast({"a": 1})),
    ("scatter", lambda: world.scatter(None)),
    ("wait", lambda: req.wait()),
    ("test", lambda: req.test()),
]:
    try:
        f()
        raise AssertionError("%s returned after finalize" % name)
    except spools.errors.FinalizedError:
        pass
print("coll_errors ok")
