"""Rank `argv[1]` waits in a collective of the world (`argv[2]`: allreduce, the wait of
an iallreduce, scatter, gatherv) that the other ranks never join: they wait in a barrier
of a duplicate communicator that the target never joins. Every rank prints its pid
first; the test interrupts the target with SIGINT."""

import os
import sys

import numpy as np
import spools

world = spools.init()
target, how = int(sys.argv[1]), sys.argv[2]
other = world.dup()
world.barrier()
print("pid %d %d %016x" % (world.rank, os.getpid(), world.job), flush=True)
if world.rank != target:
    other.barrier()
elif how == "allreduce":
    world.allreduce(np.ones(1000))
elif how == "wait":
    world.iallreduce(np.ones(10), op=lambda a, b: a + b).wait()
elif how == "scatter":
    world.scatter(None, root=(target + 1) % world.size)
else:
    world.gatherv(np.ones((world.rank, 2)), root=target)
print("collective returned", flush=True)
