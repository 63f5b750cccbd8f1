"""Every rank says who it is; rank 0 checks the world's shape."""
import spools

world = spools.init()
print("rank %d of %d" % (world.rank, world.size))
world.barrier()
sub = world.split(world.rank % 2, key=-world.rank)
dup = world.dup()
assert dup.size == world.size and dup.rank == world.rank
assert sub.size == (world.size + 1 - world.rank % 2) // 2
world.finalize()
