"""A parent spawns 2 copies of this script (mpi4py's Spawn). Each child's MPI_COMM_WORLD
is a `spools.Comm` like any other (an allreduce over it); the parent's merged
communicator with its children lives in the spawned job, which the package refuses by
name."""

import sys

import spools
from mpi4py import MPI

parent = MPI.Comm.Get_parent()
if parent == MPI.COMM_NULL:
    kids = MPI.COMM_SELF.Spawn(sys.executable, [__file__], 2)
    merged = kids.Merge()
    try:
        spools.Comm(merged)
        print("parent: accepted")
    except ValueError as e:
        print("parent: OtherJob refused" if "joined by MPI_Comm_spawn" in str(e) else f"parent: {e}")
    merged.Free()
    kids.Barrier()
    kids.Disconnect()
else:
    parent.Merge(True).Free()
    world = spools.Comm(MPI.COMM_WORLD)
    n = world.allreduce(1)
    print(f"child {MPI.COMM_WORLD.Get_rank()} of {MPI.COMM_WORLD.Get_size()}: {n // 2}")
    parent.Barrier()
    parent.Disconnect()
