"""A peer that dies (os._exit) while this rank waits in recv: PeerGoneError naming it,
never a hang. Rank 1 dies; every other rank waits for a message from it."""
import os
import sys

import numpy as np
import spools

world = spools.init()
me = world.rank
world.barrier()
if me == 1:
    sys.stdout.flush()
    os._exit(3)
buf = np.zeros(4)
try:
    world.Recv(buf, 1, 0)
except spools.PeerGoneError as e:
    assert isinstance(e, spools.SpoolsError)
    print("peergone ok rank %d: %s" % (me, e), flush=True)
    sys.exit(0)
print("recv returned", flush=True)
sys.exit(1)
