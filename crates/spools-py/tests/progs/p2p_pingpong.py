"""Ping-pong between ranks 0 and 1 with send/recv of numpy arrays: one-way latency
(half the round trip) as the median of `reps` repetitions of `iters` round trips, per
size. Usage: p2p_pingpong.py [iters] [reps] [sizes, comma-separated bytes]. Each
repetition's messages carry its number in their last byte, checked at its end, so it
doubles as a test with few iterations. Run it with OPENBLAS_NUM_THREADS=1: numpy's
BLAS threads otherwise spin and take CPU time from the ranks."""
import sys
import time

import numpy as np
import spools

world = spools.init()
me = world.rank
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
sizes = [int(s) for s in (sys.argv[3] if len(sys.argv) > 3 else "8,1048576").split(",")]
assert world.size >= 2, "needs two ranks"

for size in sizes:
    a = np.zeros(size, dtype=np.uint8)
    b = np.zeros(size, dtype=np.uint8)
    warm = max(iters // 10, 10)
    times = []
    for rep in range(reps + 1):
        count = warm if rep == 0 else iters
        world.barrier()
        t0 = time.perf_counter()
        if me == 0:
            a[-1] = rep + 1
            for i in range(count):
                world.Send(a, 1, 1)
                world.Recv(b, 1, 1)
            assert b[-1] == rep + 1
        elif me == 1:
            for i in range(count):
                world.Recv(b, 0, 1)
                world.Send(b, 0, 1)
        dt = time.perf_counter() - t0
        if rep > 0:
            times.append(dt / count / 2)
    if me == 0:
        med = sorted(times)[len(times) // 2]
        print("size %d latency_us %.3f bandwidth_MBps %.1f" % (size, med * 1e6, size / med / 1e6), flush=True)
world.barrier()
world.finalize()
