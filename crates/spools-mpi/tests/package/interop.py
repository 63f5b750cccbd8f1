"""mpi4py and the `spools` package in one program, run by test_spools_package.py under
`spools run`: one runtime, the same ranks, the same communicators.

    interop.py spools-first|mpi4py-first
"""

import os
import sys

import numpy as np

if sys.argv[1] == "spools-first":
    import spools
    from mpi4py import MPI
else:
    from mpi4py import MPI
    import spools

version = MPI.Get_library_version()
assert "Spools" in version and "_spools" in version, version

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
comm = spools.Comm(world)
assert (comm.rank, comm.size) == (rank, size)
assert spools.init().rank == rank and spools.init().size == size
right, left = (rank + 1) % size, (rank - 1) % size

# The same context: a message sent by mpi4py is received by spools, and back.
out = np.full(5, rank, dtype=np.int32)
req = world.Isend(out, dest=right, tag=7)
got = np.empty(5, dtype=np.int32)
comm.Recv(got, source=left, tag=7)
req.Wait()
assert (got == left).all(), got
req = comm.Isend(out * 10, dest=right, tag=8)
world.Recv(got, source=left, tag=8)
req.wait()
assert (got == left * 10).all(), got

# Objects: pickled by one side, unpickled by the other (both use pickle protocol 5
# over their own framing, so each side talks to itself here).
comm.send({"from": rank}, dest=right, tag=9)
assert comm.recv(source=left, tag=9) == {"from": left}

# A communicator split by mpi4py: the same members, in the same order.
sub = world.Split(rank % 2, rank)
sc = spools.Comm(sub)
assert (sc.rank, sc.size) == (sub.Get_rank(), sub.Get_size())
mine = [r for r in range(size) if r % 2 == rank % 2]
total = sc.Allreduce(np.array([rank], dtype=np.int64))
assert total[0] == sum(mine), (total, mine)
assert sub.allreduce(rank) == sum(mine)

# Collectives of both on one communicator, interleaved.
assert world.allreduce(1) == size
assert comm.Allreduce(np.ones(3))[0] == size
world.Barrier()
comm.barrier()

# Redistribution and a parallel file on mpi4py's communicator.
by_rows = spools.Layout(f"f64[{4 * size},6] block,* on {size}x1")
by_cols = spools.Layout(f"f64[{4 * size},6] *,block on 1x{size}")
a = np.full(by_rows.local_shape(rank), float(rank))
cols = comm.redistribute(a, by_rows, by_cols)
assert cols.shape == by_cols.local_shape(rank)
for i in range(4 * size):
    assert (cols[i] == i // 4).all(), cols
path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"spools-interop-{os.getppid()}.npy")
comm.write_file(path, cols, by_cols, format="npy")
back = comm.read_file(path, by_rows)
assert (back == rank).all()
world.Barrier()
if rank == 0:
    os.remove(path)

# Handles that are not communicators of this library.
try:
    spools.Comm(MPI.COMM_NULL)
except ValueError as e:
    assert "not a communicator" in str(e), e
else:
    raise AssertionError("spools.Comm(MPI.COMM_NULL) was accepted")
try:
    spools.Comm("world")
except TypeError as e:
    assert "mpi4py communicator" in str(e), e
else:
    raise AssertionError("spools.Comm('world') was accepted")

sub.Free()
print(f"ok interop {sys.argv[1]} rank {rank} of {size}")
