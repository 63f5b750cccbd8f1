"""A parent spawns 2 copies of this script (mpi4py's Spawn). Both sides take the
intercommunicator as a `spools.Comm` (`spools.Comm(parent)` in the children): its rank
and size are its own group's, `remote_size` the other's, messages go to the other
group's ranks (and match mpi4py's on the same intercommunicator), and group operations
are refused by name. The merged communicator, which lives in the spawned job, is a
`spools.Comm` like any other on both sides (an allreduce over it), and so is each
child's MPI_COMM_WORLD. Prints one line per process."""

import sys

import spools
from mpi4py import MPI


def refused(c):
    try:
        c.barrier()
    except TypeError as e:
        return "intercommunicator" in str(e)
    return False


parent = MPI.Comm.Get_parent()
if parent == MPI.COMM_NULL:
    kids = MPI.COMM_SELF.Spawn(sys.executable, [__file__], 2)
    inter = spools.Comm(kids)
    assert inter.is_inter and (inter.rank, inter.size, inter.remote_size) == (0, 1, 2), inter
    assert refused(inter)
    # Through the package to each child, back through mpi4py.
    for c in range(2):
        inter.send(b"hello %d" % c, c, tag=7)
    back = sorted(kids.recv(source=c, tag=8) for c in range(2))
    merged = kids.Merge()
    total = spools.Comm(merged).allreduce(10)
    merged.Free()
    print(f"parent: {back} {total}")
    kids.Barrier()
    kids.Disconnect()
else:
    me = MPI.COMM_WORLD.Get_rank()
    inter = spools.Comm(parent)
    assert inter.is_inter and (inter.rank, inter.size, inter.remote_size) == (me, 2, 1), inter
    assert refused(inter)
    got = bytes(inter.recv(0, tag=7))
    assert got == b"hello %d" % me, got
    parent.send(me * 100, dest=0, tag=8)
    merged = parent.Merge(True)
    total = spools.Comm(merged).allreduce(10)
    merged.Free()
    world = spools.Comm(MPI.COMM_WORLD)
    n = world.allreduce(1)
    print(f"child {me} of {MPI.COMM_WORLD.Get_size()}: {n // 2} {total}")
    parent.Barrier()
    parent.Disconnect()
