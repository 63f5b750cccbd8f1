"""Layouts, redistribution and parallel files in a few lines.

    spools run -n 4 -- python3 examples/python/layouts.py [DIR]

A 1000x600 array is built in rows blocks (each rank computes its own rows), moved to
columns cyclic over the ranks with one call (no hand-written Alltoallv), written to a
RAID-5 file from the columns, and read back by rows; one process then reads a slice of
the file without a job.
"""

import os
import sys
import tempfile

import numpy as np

import spools

world = spools.init()
P, me = world.size, world.rank
d = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()

rows = spools.Layout("f64[1000,600] block,* on %dx1" % P)
cols = spools.Layout("f64[1000,600] *,cyclic(8) on 1x%d" % P)

# This rank's rows of a[i, j] = i + j / 1000: the extents say which global elements
# (flat, row-major) this rank holds and where they go in its local array.
mine = np.empty(rows.local_shape(me))
flat = mine.reshape(-1)
for g, l, n in rows.extents(me):
    k = np.arange(g, g + n)
    flat[l : l + n] = k // 600 + (k % 600) / 1000

if me == 0:
    plan = rows.plan(cols)
    print("%s -> %s: %d bytes in %d runs (mean run %.0f bytes), %.0f%% stay on their rank"
          % (plan["from"], plan["to"], plan["total_bytes"], plan["total_runs"],
             plan["mean_run_bytes"], 100 * plan["local_share"]))

c = world.redistribute(mine, rows, cols)          # a new array: this rank's columns
assert c.shape == cols.local_shape(me)
j = [j for j in range(600) if (j // 8) % P == me]  # the columns cyclic(8) gives this rank
assert np.array_equal(c, np.arange(1000)[:, None] + np.array(j)[None, :] / 1000)

path = os.path.join(d, "layouts-example.raid5")
st = world.write_file(path, c, cols, format="raid5(unit=64KiB,count=3)", dirs=["u0", "u1", "u2"])
back = world.read_file(path, rows)               # read with another distribution
assert np.array_equal(back, mine)
world.barrier()

if me == 0:
    print("wrote %d bytes as RAID-5 (version %d), read back by rows: identical"
          % (st["bytes"], st["version"]))
    with spools.open(path) as f:                 # one process, no collective call
        print(f, "f[10:12, 3:6] =", f[10:12, 3:6].tolist())
