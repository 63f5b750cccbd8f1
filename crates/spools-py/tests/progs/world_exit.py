"""A rank that ends with sys.exit(3) while the others wait for a message from it ends
the job (no rank waits for it in finalize)."""
import sys

import numpy as np
import spools

world = spools.init()
world.barrier()
if world.rank == 1:
    sys.exit(3)
world.Recv(np.zeros(1), 1, 0)
print("recv returned", flush=True)
