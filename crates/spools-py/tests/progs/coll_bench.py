"""Timing of the Python collectives, measured as `spools bench coll` measures the Rust
calls: a verified call, a warm-up, then batches; each batch's value is the slowest
rank's mean time per call, and the median over batches is printed (microseconds).
Not part of the test suite (no timing assertions): run it by hand, e.g.

    spools run -n 4 -- python tests/progs/coll_bench.py [batches] [batch_ms]
"""

import sys
import time

import numpy as np
import spools

world = spools.init()
r, n = world.rank, world.size
batches = int(sys.argv[1]) if len(sys.argv) > 1 else 7
batch_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0


def measure(call):
    call()
    warm = 20
    world.barrier()
    t = time.perf_counter()
    for _ in range(warm):
        call()
    mine = (time.perf_counter() - t) / warm
    slowest = world.Allreduce(np.array([mine]), op="max")[0]
    iters = max(1, min(1_000_000, int(batch_ms * 1e-3 / max(slowest, 1e-9))))
    out = []
    for _ in range(batches):
        world.barrier()
        t = time.perf_counter()
        for _ in range(iters):
            call()
        mean_us = (time.perf_counter() - t) * 1e6 / iters
        out.append(world.Allreduce(np.array([mean_us]), op="max")[0])
    return float(np.median(out))


rows = []
for size in [8, 1 << 20]:
    k = size // 8
    a = np.arange(k, dtype=np.float64) + r
    o = np.empty_like(a)
    want = np.arange(k, dtype=np.float64) * n + n * (n - 1) / 2
    assert np.array_equal(world.Allreduce(a, out=o), want)
    rows.append(("allreduce out=", size, measure(lambda: world.Allreduce(a, out=o))))
    rows.append(("allreduce new", size, measure(lambda: world.Allreduce(a))))
    rows.append(("iallreduce+wait", size, measure(lambda: world.Iallreduce(a).wait())))
    b = np.zeros(size, dtype=np.uint8)
    rows.append(("bcast", size, measure(lambda: world.Bcast(b, root=0))))
    cb = lambda x, y: x + y
    if size == 8:
        rows.append(("allreduce callable", size, measure(lambda: world.Allreduce(a, op=cb, out=o))))
if r == 0:
    print("ranks %d, median of %d batches of %g ms, microseconds per call" % (n, batches, batch_ms))
    for name, size, us in rows:
        print("%-20s %8d B %10.2f us" % (name, size, us))
