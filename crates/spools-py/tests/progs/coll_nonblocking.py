"""The non-blocking collectives: several in flight at once with a blocking one in
between, waited in another order; overlapping with numpy compute while test() drives
them; out= and the in-place broadcast; a request dropped unwaited still completes its
part; a Python reduction function's exception comes out of wait()."""

import numpy as np
import spools
from coll_common import inp, stack, ref, same

world = spools.init()
r, n = world.rank, world.size

# Many at once, of several dtypes, then a blocking one, then the waits in reverse order.
reqs = []
b = world.ibarrier()
x = inp(r, np.float64, (3, 4))
reqs.append(("iallreduce", world.Iallreduce(x, op="max"), ref("max", stack(n, np.float64, (3, 4)))))
z = inp(r, np.complex128, (5,))
reqs.append(("iallgather", world.Iallgather(z), stack(n, np.complex128, (5,))))
bo = inp(r, np.bool_, (7,))
reqs.append(("iallreduce bool", world.Iallreduce(bo, op="prod"), ref("prod", stack(n, np.bool_, (7,)))))
send = np.stack([inp(r, np.int16, (3,), salt=j) for j in range(n)])
reqs.append(("ialltoall", world.Ialltoall(send), np.stack([inp(i, np.int16, (3,), salt=r) for i in range(n)])))
reqs.append(("iscan", world.Iscan(inp(r, np.int64, (2, 2))), ref("sum", stack(n, np.int64, (2, 2), upto=r + 1))))
a = inp(r, np.uint32, (2 * n, 3))
reqs.append(("ireduce_scatter", world.Ireduce_scatter(a, op="min"), ref("min", stack(n, np.uint32, (2 * n, 3)))[2 * r : 2 * r + 2]))
same(world.Allreduce(np.array([r], dtype=np.int64)), np.array([n * (n - 1) // 2]), "blocking among non-blocking")
g = world.Igather(inp(r, np.float32, (2,)), root=n - 1)
red = world.Ireduce(inp(r, np.int8, (4,)), op="sum", root=0)
src = np.stack([inp(50 + i, np.float64, (2, 3)) for i in range(n)])
if r == 0:
    sc = world.Iscatter(src, root=0)
else:
    mine = np.empty((2, 3))
    sc = world.Iscatter(None, root=0, out=mine)
bc = inp(r, np.complex64, (6,))
bq = world.Ibcast(bc, root=n - 1)
for name, q, want in reversed(reqs):
    got = q.wait()
    same(got, want, name)
    assert q.wait() is got, "a second wait returns the same result"
    assert q.test() and "done" in repr(q)
got = g.wait()
if r == n - 1:
    same(got, stack(n, np.float32, (2,)), "igather")
else:
    assert got is None
got = red.wait()
if r == 0:
    same(got, ref("sum", stack(n, np.int8, (4,))), "ireduce")
else:
    assert got is None
got = sc.wait()
same(got, src[r], "iscatter")
if r != 0:
    assert got is mine
assert bq.wait() is bc
same(bc, inp(n - 1, np.complex64, (6,)), "ibcast in place")
assert b.wait() is None

# Overlap: a 1 MiB allreduce in flight while numpy computes; test() drives it.
big = inp(r, np.float64, (131072,))
out = np.empty_like(big)
q = world.Iallreduce(big, out=out)
big[:] = -1  # the input was copied when the call started
acc = np.zeros(256)
polls = 0
while not q.test():
    acc += np.sin(np.arange(256) + polls)  # compute meanwhile
    polls += 1
assert q.wait() is out
same(out, ref("sum", stack(n, np.float64, (131072,))), "overlapped iallreduce")
assert np.isfinite(acc).all()

# In place through out=a.
a = inp(r, np.int32, (10,))
assert world.Iallreduce(a, op="max", out=a).wait() is a
same(a, ref("max", stack(n, np.int32, (10,))), "in-place iallreduce")

# A request dropped without wait still does its part: the next collective works.
q = world.Iallgather(np.array([r]))
del q
same(world.Allgather(np.array([r * 2])), np.arange(n).reshape(n, 1) * 2, "after a dropped request")

# A Python function's exception comes out of wait() (where it ran).
class Boom(Exception):
    pass


called = []


def boom(a, b):
    called.append(1)
    raise Boom("boom")


q = world.Iallreduce(np.ones(3), op=boom)
try:
    q.wait()
    raised = False
except Boom:
    raised = True
except spools.SpoolsError as e:
    # Another rank's function raised: every rank's wait() says so (the collective's
    # agreement), naming it.
    assert not called and "reduction function raised" in str(e), repr(e)
    raised = "other"
assert (raised is True) == bool(called), (raised, called)
assert raised is not False or n == 1, "a rank's wait() returned a result a failed combination spoiled"

try:
    q.wait()
    again = None
except spools.SpoolsError as e:
    again = e
assert (again is not None) == (raised is not False), "a second wait of a failed request raises SpoolsError"
assert world.Allreduce(np.array([int(raised is not False)]))[0] == (n if n > 1 else 0)

# iscatter needs out= on the other ranks.
if n > 1 and r != 0:
    try:
        world.Iscatter(None, root=0)
        err = None
    except ValueError as e:
        err = e
    assert err is not None and "out=" in str(err), err
world.barrier()
print("coll_nonblocking ok")
