"""Every blocking collective on numpy arrays, against numpy references: reductions with
the four built-in operators on every numeric dtype (and complex sums), the in-place
forms (out=a), given out= arrays, every root, the data movements on every dtype
(complex, records), the v-forms with blocks of different sizes (empty ones too), and
the same in a sub-communicator."""

import numpy as np
import spools
from coll_common import DTYPES, MOVE_DTYPES, inp, stack, ref, same

world = spools.init()


def reductions(c):
    r, n = c.rank, c.size
    for dt in DTYPES:
        for shape in [(1,), (3, 4), (5000,)]:
            s = stack(n, dt, shape)
            mine = inp(r, dt, shape)
            for op in ["sum", "prod", "min", "max"]:
                want = ref(op, s)
                what = "%s %s %s" % (op, np.dtype(dt), shape)
                same(c.Allreduce(mine, op=op), want, "allreduce " + what)
                for root in sorted({0, n - 1, n // 2}):
                    got = c.Reduce(mine, op=op, root=root)
                    if r == root:
                        same(got, want, "reduce to %d %s" % (root, what))
                    else:
                        assert got is None, "reduce on a non-root returned %r" % (got,)
                same(c.Scan(mine, op=op), ref(op, s[: r + 1]), "scan " + what)
            # The constants, in place, and into a given out.
            b = mine.copy()
            assert c.Allreduce(b, op=spools.MAX, out=b) is b
            same(b, ref("max", s), "in-place allreduce %s" % np.dtype(dt))
            o = np.empty_like(mine)
            assert c.Allreduce(mine, spools.SUM, out=o) is o
            same(o, ref("sum", s), "allreduce into out %s" % np.dtype(dt))
            b = mine.copy()
            got = c.Reduce(b, op=spools.MIN, root=n - 1, out=b)
            if r == n - 1:
                assert got is b
                same(b, ref("min", s), "in-place reduce")
            else:
                same(b, mine, "a non-root's array after an in-place reduce")
            b = mine.copy()
            assert c.Scan(b, op=spools.PROD, out=b) is b
            same(b, ref("prod", s[: r + 1]), "in-place scan")
    # Complex sums (real and imaginary parts).
    for dt in [np.complex64, np.complex128]:
        s = stack(n, dt, (2, 3))
        same(c.Allreduce(inp(r, dt, (2, 3))), s.sum(axis=0).astype(dt), "complex allreduce")
        same(c.Scan(inp(r, dt, (2, 3))), s[: r + 1].sum(axis=0).astype(dt), "complex scan")
    # Reduce-scatter: equal blocks, and counts (one rank may get none).
    for dt in [np.int32, np.float64, np.bool_]:
        a = inp(r, dt, (2 * n, 3))
        want = ref("sum", stack(n, dt, (2 * n, 3)))
        same(c.Reduce_scatter(a), want[2 * r : 2 * r + 2], "reduce_scatter %s" % np.dtype(dt))
        counts = [(i * 2) % 3 for i in range(n)]
        total = sum(counts)
        a = inp(r, dt, (total, 2))
        want = ref("max", stack(n, dt, (total, 2)))
        d = sum(counts[:r])
        o = np.empty((counts[r], 2), dtype=dt)
        assert c.Reduce_scatter(a, counts, op="max", out=o) is o
        same(o, want[d : d + counts[r]], "reduce_scatter with counts")


def movements(c):
    r, n = c.rank, c.size
    for dt in MOVE_DTYPES:
        name = str(np.dtype(dt))
        for shape in [(3,), (2, 5), (3000,)]:
            # bcast: in place, from every root.
            for root in sorted({0, n - 1}):
                a = inp(r, dt, shape)
                assert c.Bcast(a, root=root) is a
                same(a, inp(root, dt, shape), "bcast from %d %s %s" % (root, name, shape))
            mine = inp(r, dt, shape)
            every = stack(n, dt, shape)
            got = c.Gather(mine, root=n - 1)
            if r == n - 1:
                same(got, every, "gather %s" % name)
            else:
                assert got is None
            same(c.Allgather(mine), every, "allgather %s" % name)
            o = np.empty((n,) + shape, dtype=dt)
            assert c.Allgather(mine, out=o) is o
            same(o, every, "allgather into out")
            # alltoall: block j of rank i is inp(i, salt=j); rank j gets [i] = that.
            send = np.stack([inp(r, dt, shape, salt=j) for j in range(n)])
            want = np.stack([inp(i, dt, shape, salt=r) for i in range(n)])
            same(c.Alltoall(send), want, "alltoall %s" % name)
            # scatter from the last rank: rank i gets the root's [i].
            src = np.stack([inp(100 + i, dt, shape) for i in range(n)])
            got = c.Scatter(src if r == n - 1 else None, root=n - 1)
            same(got, src[r], "scatter %s" % name)
        # v-forms: rank i has (i * 2) % 3 rows of shape (2,) (some ranks none).
        rows = [(i * 2) % 3 for i in range(n)]
        mine = inp(r, dt, (rows[r], 2))
        every = np.concatenate([inp(i, dt, (rows[i], 2)) for i in range(n)])
        got = c.Gatherv(mine, root=0)
        if r == 0:
            same(got, every, "gatherv %s" % name)
        else:
            assert got is None
        same(c.Allgatherv(mine), every, "allgatherv %s" % name)
        src = inp(7, dt, (sum(rows), 2))
        d = sum(rows[:r])
        got = c.Scatterv(src if r == 0 else None, rows if r == 0 else None, root=0)
        same(got, src[d : d + rows[r]], "scatterv %s" % name)
        # alltoallv: rank i sends (i + j) % 3 rows to rank j, rows of inp(i, salt=j).
        sc = [(r + j) % 3 for j in range(n)]
        send = np.concatenate([inp(r, dt, (sc[j], 2), salt=j) for j in range(n)])
        want = np.concatenate([inp(i, dt, ((i + r) % 3, 2), salt=r) for i in range(n)])
        same(c.Alltoallv(send, sc), want, "alltoallv %s" % name)
    # Other buffers: a bytearray broadcast in place.
    b = bytearray(b"rank %d" % r)
    c.Bcast(b, root=0)
    assert bytes(b) == b"rank 0", b


for comm in [world, world.split(world.rank % 2, key=-world.rank)]:
    reductions(comm)
    movements(comm)
# Siblings of one split share a context: a rank whose sub-communicator finished early
# must not finalise while the other one's collectives still run (the runtime would take
# that for a rank missing from them).
world.barrier()
print("coll_blocking ok")
