"""The README's Python tour (README.md, section Python): kept identical to it by
crates/spools-py/tests/test_readme.py, which also runs it."""

import os
import numpy as np
import spools

world = spools.init()            # done on import under a launcher; alone, a job of 1 rank
rank, size = world.rank, world.size
right, left = (rank + 1) % size, (rank - 1) % size

# As in mpi4py, capitalised calls take buffers, used in place (numpy arrays, bytearray,
# memoryview): no copies; lower-case ones take any picklable object.
a = np.full(1000, rank, dtype=np.float64)
halo = np.empty(1000)
status = world.Sendrecv(a, right, halo, source=left, sendtag=1, recvtag=1)
assert status.source == left and (halo == left).all()
req = world.Irecv(halo, source=left)          # non-blocking: a Request
world.Send(a, right)
req.wait()
world.send({"from": rank}, right)              # any picklable object
assert world.recv(source=left) == {"from": left}

# Collectives return new arrays (or fill out=); a Python function works as an operator.
total = world.Allreduce(np.array([rank, 1.0]))                 # [sum of ranks, size]
assert total.tolist() == [size * (size - 1) / 2, size]
biggest = world.Allreduce(np.array([rank]), op="max")
assert biggest[0] == size - 1
rows = world.Gather(np.array([rank, rank * rank]), root=0)     # shape (size, 2) on root
concat = world.Allreduce(np.array([rank]), op=spools.Op(lambda lo, hi: lo * 10 + hi))
request = world.Iallreduce(np.ones(3))                         # overlaps with work
assert (request.wait() == size).all()

# RPC: a function registered by name, run on another rank; its exceptions come back.
@world.rpc
def norm(v):
    return float(np.linalg.norm(v))

world.barrier()                                  # every rank has registered it
assert world.call(right, "norm", np.array([3.0, 4.0])) == 5.0

# Distributions: one call moves a distributed array to another distribution.
by_rows = spools.Layout(f"f64[1000,600] block,* on {size}x1")
by_cols = spools.Layout(f"f64[1000,600] *,cyclic(8) on 1x{size}")
mine = np.full(by_rows.local_shape(rank), float(rank))
cols = world.redistribute(mine, by_rows, by_cols)
assert cols.shape == by_cols.local_shape(rank)

# Parallel files: one .npy (or canonical, RAID-0, RAID-5) file written by every rank...
path = f"/tmp/spools-tour-{world.job:x}.npy"
world.write_file(path, cols, by_cols, format="npy")
back = world.read_file(path, by_rows)                          # ...read with another layout
assert (back == rank).all()
world.barrier()
if rank == 0:                   # ...and read (or sliced, h5py-like) by one process
    with spools.open(path) as f:
        assert f.shape == (1000, 600) and (f[:, 10:12] == np.load(path)[:, 10:12]).all()
    os.remove(path)
