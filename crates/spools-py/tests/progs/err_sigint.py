"""Every rank prints its pid, then waits in a receive that no message matches (or, with
`argv[1] == "wait"`, in Request.wait of such an irecv); the test interrupts one."""
import os
import sys

import numpy as np
import spools

world = spools.init()
world.barrier()
print("pid %d %d %016x" % (world.rank, os.getpid(), world.job), flush=True)
buf = np.zeros(1)
if len(sys.argv) > 1 and sys.argv[1] == "wait":
    world.irecv(buf, spools.ANY_SOURCE, 99).wait()
else:
    world.recv(buf, spools.ANY_SOURCE, 99)
print("recv returned", flush=True)
