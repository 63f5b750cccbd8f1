"""mpi4py on Spools: `spools run -n 4 -- python examples/mpi/hello_mpi4py.py` with mpi4py
built against the MPI standard ABI (MPI4PY_BUILD_MPIABI=1, docs/mpi.md)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
# Objects (pickled: lower-case methods) and buffers (capitalised ones), as mpi4py has them.
table = comm.bcast({"step": 1, "name": "heat"} if rank == 0 else None, root=0)
local = np.full(4, rank, dtype="f8")
total = np.empty(4)
comm.Allreduce(local, total, op=MPI.SUM)
cart = comm.Create_cart([size], periods=[True])
left, right = cart.Shift(0, 1)
got = cart.sendrecv(rank, dest=right, source=left)
print(f"rank {rank} of {size}: {table['name']} step {table['step']}, "
      f"sum {total[0]:g}, left neighbour {got}")
if rank == 0:
    print(MPI.Get_library_version().splitlines()[0])
