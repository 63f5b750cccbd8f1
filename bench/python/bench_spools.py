"""The spools side of the Python benchmarks: the same programs as bench_mpi4py.py,
written with the `spools` package. Run under the spools launcher:

    spools run -n 2 -- python bench/python/bench_spools.py pingpong
    spools run -n 4 -- python bench/python/bench_spools.py coll
    spools run -n 4 -- python bench/python/bench_spools.py redist

Rank 0 prints one line `BENCH {json}` (read by run.py). Every case checks its result once
against a numpy reference before it is timed (see common.py for the timing discipline).
"""

import os
import sys

import numpy as np
import spools

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

IMPL = "spools"


def slowest(world, dt):
    return float(world.Allreduce(np.array([dt]), op="max")[0])


def pingpong(world):
    rank = world.rank
    c.check(world.size == 2, "pingpong runs on 2 ranks")
    results = {}
    for name, n, warm, reps in c.PINGPONG:
        buf = np.zeros(n, dtype=np.float64)
        ref = np.arange(n, dtype=np.float64) + 1.0
        if rank == 0:
            buf[:] = ref
            world.Send(buf, 1, tag=1)
            world.Recv(buf, source=1, tag=1)
            c.check(np.array_equal(buf, 2.0 * ref), "spools pingpong %s echo" % name)
        else:
            world.Recv(buf, source=0, tag=1)
            c.check(np.array_equal(buf, ref), "spools pingpong %s receive" % name)
            buf *= 2.0
            world.Send(buf, 0, tag=1)

        def loop(k):
            if rank == 0:
                for _ in range(k):
                    world.Send(buf, 1, tag=0)
                    world.Recv(buf, source=1, tag=0)
            else:
                for _ in range(k):
                    world.Recv(buf, source=0, tag=0)
                    world.Send(buf, 0, tag=0)

        loop(warm)
        times = []
        for _ in range(c.PINGPONG_BATCHES):
            world.barrier()
            t0 = c.clock()
            loop(reps)
            times.append((c.clock() - t0) / reps / 2.0)
        one_way = c.median(times)
        results[name] = {"one_way_us": one_way * 1e6, "mb_s": n * 8 / one_way / 1e6}
    return results


def coll(world):
    rank, size = world.rank, world.size
    results = {}
    for name, op, n, warm, reps in c.COLL:
        if op == "allreduce":
            a = np.full(n, rank + 1.0)
            out = np.empty(n)
            r = world.Allreduce(a, op="sum", out=out)
            c.check(r is out, "spools allreduce with out= returns out")
            c.check(np.all(out == size * (size + 1) / 2.0), "spools %s" % name)

            def call(a=a, out=out):
                world.Allreduce(a, op="sum", out=out)

        else:
            ref = np.arange(n, dtype=np.float64) + 3.0
            a = ref.copy() if rank == 0 else np.zeros(n)
            world.Bcast(a, root=0)
            c.check(np.array_equal(a, ref), "spools %s" % name)

            def call(a=a):
                world.Bcast(a, root=0)

        for _ in range(warm):
            call()
        times = []
        for _ in range(c.COLL_BATCHES):
            world.barrier()
            t0 = c.clock()
            for _ in range(reps):
                call()
            times.append(slowest(world, (c.clock() - t0) / reps))
        results[name] = {"us": c.median(times) * 1e6}
    return results


def redist(world):
    me = world.rank
    results = {}
    for name, sdists, sgrid, ddists, dgrid in c.REDIST:
        src = spools.Layout(c.spec(sdists, sgrid))
        dst = spools.Layout(c.spec(ddists, dgrid))
        rows, cols = c.global_indices(me, sdists, c.parse_grid(sgrid))
        a = c.reference(rows, cols)
        out = world.redistribute(a, src, dst)
        orows, ocols = c.global_indices(me, ddists, c.parse_grid(dgrid))
        c.check(out.shape == (len(orows), len(ocols)), "spools redistribution %s: shape %s" % (name, out.shape))
        c.check(np.array_equal(out, c.reference(orows, ocols)), "spools redistribution %s" % name)
        for _ in range(c.REDIST_WARMUP):
            world.redistribute(a, src, dst)
        times = []
        for _ in range(c.REDIST_BATCHES):
            world.barrier()
            t0 = c.clock()
            world.redistribute(a, src, dst)
            times.append(slowest(world, c.clock() - t0))
        results[name] = {"ms": c.median(times) * 1e3}
    return results


def main():
    test = sys.argv[1]
    world = spools.init()
    results = {"pingpong": pingpong, "coll": coll, "redist": redist}[test](world)
    if world.rank == 0:
        c.emit(IMPL, test, world.size, results)


if __name__ == "__main__":
    main()
