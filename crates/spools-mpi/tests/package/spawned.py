"""A parent spawns 2 copies of this script (mpi4py's Spawn). Both sides take the
intercommunicator as a `spools.Comm` (`spools.Comm(parent)` in the children): its rank
and size are its own group's, `remote_size` the other's, messages go to the other
group's ranks (and match mpi4py's on the same intercommunicator), and group operations
are refused by name; requests and RPCs on it complete (wait_any, RpcRequest.done()
drive the spawned job's progress). The merged communicator, which lives in the spawned job, is a
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
    # Requests and RPCs of the spawned job complete by that job's progress.
    bufs = [bytearray(3) for _ in range(2)]
    reqs = [inter.Irecv(bufs[c], c, tag=9) for c in range(2)]
    first, _ = spools.wait_any(reqs)
    second, _ = spools.wait_any(reqs)
    assert {first, second} == {0, 1} and bufs == [b"c0!", b"c1!"], (first, second, bufs)
    r = inter.call_async(1, "twice", 21)
    while not r.done():
        pass
    assert r.result() == 42 and inter.call(0, "twice", 5) == 10
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
    inter.register_rpc("twice", lambda x: 2 * x)
    parent.send(me * 100, dest=0, tag=8)
    inter.Send(b"c%d!" % me, 0, tag=9)
    merged = parent.Merge(True)
    total = spools.Comm(merged).allreduce(10)
    merged.Free()
    world = spools.Comm(MPI.COMM_WORLD)
    n = world.allreduce(1)
    print(f"child {me} of {MPI.COMM_WORLD.Get_size()}: {n // 2} {total}")
    parent.Barrier()
    parent.Disconnect()
