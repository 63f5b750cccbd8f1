"""Every rank writes its block of a 2-D field straight into one Zarr v3 array (shards of
256x256, chunks of 64x64, zstd): no MPI, no server, no gather on one rank."""

import sys

import numpy as np
import spools

world = spools.init()
path = sys.argv[1] if len(sys.argv) > 1 else "field.zarr"
layout = spools.Layout(f"f32[1024,768] block,* on {world.size}x1")
rows = layout.local_shape(world.rank)
start = world.rank * -(-1024 // world.size)            # this rank's first global row
i, j = np.indices(rows)
field = np.sin((i + start) / 100.0, dtype=np.float32) * np.cos(j / 50.0, dtype=np.float32)
world.write_file(path, field, layout, format="zarr(chunk=64x64,shard=256x256,codec=zstd)")
if world.rank == 0:
    print(f"wrote {path} from {world.size} ranks")
