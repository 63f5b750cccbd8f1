"""World.abort(code, message): rank 1 aborts with code 7 while the others wait in a
receive, which raises PeerGoneError naming the cause; split with color None, same_host
and job before."""
import sys

import numpy as np
import spools

world = spools.init()
me, n = world.rank, world.size
jobs = np.zeros(n, dtype=np.uint64)
for r in range(n):
    if r != me:
        world.Send(np.array([world.job], dtype=np.uint64), r, 1)
for r in range(n):
    if r != me:
        b = np.zeros(1, dtype=np.uint64)
        world.Recv(b, r, 1)
        jobs[r] = b[0]
jobs[me] = world.job
assert len(set(jobs.tolist())) == 1, jobs
assert all(world.same_host(r) for r in range(n))
sub = world.split(None if me == 0 else 1)
assert (sub is None) == (me == 0) and (sub is None or sub.size == n - 1)
world.barrier()
if me == 1:
    print("aborting", flush=True)
    world.abort(7, "giving up on purpose")
try:
    world.Recv(np.zeros(1), 1, 2)
except spools.PeerGoneError as e:
    assert "giving up on purpose" in str(e), str(e)
    print("peer gone rank %d" % me, flush=True)
    sys.exit(0)
sys.exit(1)
