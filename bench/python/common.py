"""What the spools and the mpi4py benchmark programs share: the cases, the timing
discipline and the reference data. Only plain Python and numpy (no messaging) here, so
that both sides are measured the same way and check against the same references.

Timing: every measurement is a list of batches; a batch is `reps` calls between two
clocks, preceded by a barrier, and its time is the slowest rank's (each side reduces the
per-rank times with its own `max` allreduce, outside the clocks). The figure reported is
the median over the batches; the driver then takes the median over runs.
"""

import json
import statistics
import sys
import time

import numpy as np

# Ping-pong: (name, float64 elements, warm-up round trips, round trips per batch)
PINGPONG = [
    ("8B", 1, 2000, 4000),
    ("1MiB", 1 << 17, 20, 200),
]
PINGPONG_BATCHES = 7

# Collectives on 4 ranks: (name, operation, float64 elements, warm-up calls, calls per batch)
COLL = [
    ("allreduce_8B", "allreduce", 1, 500, 2000),
    ("allreduce_1MiB", "allreduce", 1 << 17, 10, 60),
    ("bcast_1MiB", "bcast", 1 << 17, 10, 100),
]
COLL_BATCHES = 7

# Redistributions of a 2048x2048 float64 array on 4 ranks: (name, source, destination).
# The first is the case; the second moves single elements (runs of 8 bytes).
N = 2048
REDIST = [
    ("rows_block_to_cyclic", "block,*", "4x1", "cyclic,*", "4x1"),
    ("2x2_block_to_cyclic", "block,block", "2x2", "cyclic,cyclic", "2x2"),
]
REDIST_WARMUP = 1
REDIST_BATCHES = 7


def spec(dists, grid, n=N):
    """The spools layout text of a 2-D float64 array."""
    return "f64[%d,%d] %s on %s" % (n, n, dists, grid)


def parse_grid(grid):
    return tuple(int(x) for x in grid.split("x"))


def owner_and_local(n, p, dist):
    """Per global index along one dimension: the owning grid coordinate and the local
    index there (MPI darray rules: block = blocks of ceil(n/p), cyclic = cyclic(1))."""
    g = np.arange(n)
    if dist == "*":
        return np.zeros(n, dtype=np.int64), g
    if dist == "block":
        b = -(-n // p)
        return g // b, g % b
    if dist == "cyclic":
        return g % p, g // p
    raise ValueError("unknown distribution %r (block, cyclic, *)" % dist)


def coords(rank, grid):
    """Row-major grid coordinates of a rank (units are numbered row-major)."""
    return (rank // grid[1], rank % grid[1])


def global_indices(rank, dists, grid, n=N):
    """The global row and column indices a rank holds, in local order."""
    c = coords(rank, grid)
    out = []
    for d, dist in enumerate(dists.split(",")):
        owner, local = owner_and_local(n, grid[d], dist)
        mine = np.nonzero(owner == c[d])[0]
        out.append(mine[np.argsort(local[mine], kind="stable")])
    return out[0], out[1]


def reference(rows, cols, n=N):
    """The reference array's values at these global rows and columns: a[i, j] = i*n + j."""
    return (rows[:, None] * n + cols[None, :]).astype(np.float64)


def median(xs):
    return statistics.median(xs)


def clock():
    return time.perf_counter()


def emit(impl, test, ranks, results, extra=None):
    """Rank 0's one line of JSON, read by run.py."""
    doc = {"impl": impl, "test": test, "ranks": ranks, "results": results}
    if extra:
        doc.update(extra)
    sys.stdout.write("BENCH " + json.dumps(doc) + "\n")
    sys.stdout.flush()


def check(cond, what):
    if not cond:
        raise AssertionError("verification failed: " + what)
