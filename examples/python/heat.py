"""Heat diffusion on a 2-D grid, distributed over ranks in blocks: the README's main job
(`spools demo heat`) written in numpy on top of `spools`.

Run it on 4 ranks (a 2x2 grid of blocks)::

    spools run -n 4 -- python3 examples/python/heat.py --n 768 --steps 200 --dir target/heat-py

Every rank holds one block of the grid with a ring of ghost cells around it. Each step
swaps the block's edge rows and columns with the four neighbours (`Sendrecv`), then
updates every interior point from its neighbours with numpy. Every `--every` steps the
grid goes to a `.npy` snapshot that every rank writes its block of (`write_file`); the
final state also goes to a RAID-5 file striped over three directories.

The sizes, the initial state and the arithmetic (the same expression, so the same
rounding) are the Rust demo's: the snapshots are bit-identical to those of
`spools demo heat --n N --steps S --every E --ranks P`. `numpy.load` reads them, and
`spools.open` reads them (or a slice of them) without a job.
"""

import argparse
import os
import time

import numpy as np

import spools

ALPHA = 0.2


def grid(p):
    """A near-square grid of `p` blocks (rows x columns), as the Rust demo picks it."""
    a = max(int(p**0.5), 1)
    while a > 1 and p % a != 0:
        a -= 1
    return a, p // a


def initial(n, i, j):
    """The initial temperature at global indices (i, j) (broadcast arrays): a hot square
    and warm stripes, 0 on the grid's edges."""
    lo, hi = n // 3, 2 * n // 3
    square = (i >= lo) & (i < hi) & (j >= lo) & (j < hi)
    stripe = (j % 64) < 4
    t = np.where(square, 100.0, np.where(stripe, 25.0, 0.0))
    edge = (i == 0) | (j == 0) | (i == n - 1) | (j == n - 1)
    return np.where(edge, 0.0, t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=768, help="grid points per side")
    ap.add_argument("--steps", type=int, default=200, help="time steps")
    ap.add_argument("--every", type=int, default=50, help="snapshot every this many steps")
    ap.add_argument("--dir", default="target/heat-py", help="directory of the snapshot files")
    args = ap.parse_args()
    n, steps, every = args.n, args.steps, args.every

    world = spools.init()
    me = world.rank
    px, py = grid(world.size)
    layout = spools.Layout("f64[%d,%d] block,block on %dx%d" % (n, n, px, py))
    rows, cols = layout.local_shape(me)
    cx, cy = layout.coords(me)  # this rank's place in the grid of blocks
    i0, j0 = cx * -(-n // px), cy * -(-n // py)  # its first global row and column
    if me == 0:
        os.makedirs(args.dir, exist_ok=True)
    world.barrier()

    # The block with a ghost ring: u[1:-1, 1:-1] is this rank's part of the grid.
    u = np.zeros((rows + 2, cols + 2))
    gi = np.arange(i0, i0 + rows)[:, None]
    gj = np.arange(j0, j0 + cols)[None, :]
    u[1:-1, 1:-1] = initial(n, gi, gj)
    nxt = u.copy()
    # Points on the grid's edge stay at 0.
    fixed = (gi == 0) | (gj == 0) | (gi == n - 1) | (gj == n - 1)

    def rank_at(x, y):
        return x * py + y

    up = rank_at(cx - 1, cy) if cx > 0 else None
    down = rank_at(cx + 1, cy) if cx + 1 < px else None
    left = rank_at(cx, cy - 1) if cy > 0 else None
    right = rank_at(cx, cy + 1) if cy + 1 < py else None
    # Columns are strided in the block: they travel through contiguous buffers.
    col_out, col_in = np.empty(rows), np.empty(rows)

    def halo(u):
        """Swaps edges with the neighbours: pairwise, vertical then horizontal, so every
        Sendrecv meets its partner's."""
        if up is not None:  # my top row up, their bottom row into my top ghost row
            world.Sendrecv(u[1, 1:-1], up, u[0, 1:-1], source=up, sendtag=0, recvtag=1)
        if down is not None:
            world.Sendrecv(u[-2, 1:-1], down, u[-1, 1:-1], source=down, sendtag=1, recvtag=0)
        if left is not None:
            col_out[:] = u[1:-1, 1]
            world.Sendrecv(col_out, left, col_in, source=left, sendtag=2, recvtag=3)
            u[1:-1, 0] = col_in
        if right is not None:
            col_out[:] = u[1:-1, -2]
            world.Sendrecv(col_out, right, col_in, source=right, sendtag=3, recvtag=2)
            u[1:-1, -1] = col_in

    def snapshot(u, path, **kw):
        t = time.perf_counter()
        world.write_file(path, np.ascontiguousarray(u[1:-1, 1:-1]), layout, **kw)
        return time.perf_counter() - t

    world.barrier()
    t_all = time.perf_counter()
    halo_s = file_s = 0.0
    snaps = 0
    for step in range(1, steps + 1):
        t = time.perf_counter()
        halo(u)
        halo_s += time.perf_counter() - t
        c = u[1:-1, 1:-1]
        # The Rust demo's expression, term for term: the same rounding.
        new = c + ALPHA * (((u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:])) - 4.0 * c)
        nxt[1:-1, 1:-1] = np.where(fixed, 0.0, new)
        u, nxt = nxt, u
        if step % every == 0 or step == steps:
            path = os.path.join(args.dir, "heat-%05d.npy" % step)
            file_s += snapshot(u, path, format="npy", sync=False)
            snaps += 1
    # The final state also goes to a RAID-5 file striped over three directories.
    raid_s = snapshot(
        u,
        os.path.join(args.dir, "heat-final.raid5"),
        format="raid5(unit=64KiB,count=3)",
        dirs=["d0", "d1", "d2"],
        sync=True,
    )
    total_s = time.perf_counter() - t_all
    if me == 0:
        mb = n * n * 8 / 1e6
        print("heat.py: %dx%d f64, %d steps, %d ranks as %dx%d blocks" % (n, n, steps, world.size, px, py))
        print("  halo exchange (rank 0)        %9.3f s" % halo_s)
        print("  %d snapshots to .npy files    %9.3f s  %8.0f MB/s" % (snaps, file_s, snaps * mb / max(file_s, 1e-9)))
        print("  final state to RAID-5, synced %9.3f s" % raid_s)
        print("  whole run                     %9.3f s" % total_s)


if __name__ == "__main__":
    main()
