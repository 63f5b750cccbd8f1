"""Under Open MPI's mpirun with SPOOLS_BOOTSTRAP: `import spools` joins the job; a ring
of sends and an exchange of a large array check the messaging."""
import numpy as np
import spools

world = spools.init()
me, n = world.rank, world.size
right, left = (me + 1) % n, (me - 1) % n
small = np.zeros(3)
big = np.zeros(100_000)
world.Sendrecv(np.full(3, me * 1.0), right, small, left)
world.Sendrecv(np.arange(100_000.0) + me, right, big, left, sendtag=2, recvtag=2)
assert np.all(small == left) and np.array_equal(big, np.arange(100_000.0) + left)
print("mpirun rank %d of %d ok" % (me, n))
world.finalize()
