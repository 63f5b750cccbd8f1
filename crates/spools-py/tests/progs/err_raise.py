"""A rank that raises ends the job: rank `argv[1]` raises while the others wait in a
receive; its traceback is printed once, the others print the excepthook's one line."""
import sys

import numpy as np
import spools

world = spools.init()
bad = int(sys.argv[1])
print("job %016x" % world.job, flush=True)
world.barrier()
if world.rank == bad:
    def deep(x):
        raise ValueError("boom from rank %d (%d)" % (world.rank, x))
    deep(42)
world.Recv(np.zeros(1), spools.ANY_SOURCE, 3)
print("recv returned", flush=True)
