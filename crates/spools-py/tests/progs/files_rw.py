"""Parallel files: `files_rw.py write DIR SPEC` writes the global array laid out as SPEC
in every format; `files_rw.py read DIR SPEC` reads each back into SPEC (another rank
count, another distribution) and checks it against the numpy reference. Every rank
prints one line per file."""

import os
import sys

import numpy as np

import spools
from layout_ref import global_array, part

DATASET = "f64[29,13]"
FORMATS = {
    "a.npy": dict(format="npy"),
    "a.bin": dict(format="canonical", sync=False),
    "p.npy": dict(format="npy", in_place=True),
    "r0": dict(format="raid0(unit=256B,count=3)", dirs=["d0", "d1", "d2"]),
    "r5": dict(format="raid5(unit=128B,count=4)", dirs=["d0", "d1"]),
}

world = spools.init()
mode, d, spec = sys.argv[1], sys.argv[2], sys.argv[3]
assert spec.startswith(DATASET)
glob = global_array(spec, seed=3)
me = world.rank
if mode == "write":
    mine = part(glob, spec, me)
    for name, kw in FORMATS.items():
        st = world.write_file(os.path.join(d, name), mine, spec, **kw)
        assert st["bytes"] == glob.nbytes, st
        if name in ("r0", "r5"):
            # A second write is a new version, replacing the first atomically.
            st2 = world.write_file(os.path.join(d, name), mine, spools.Layout(spec), **kw)
            assert st2["version"] == st["version"] + 1, (st, st2)
        if name in ("a.npy", "p.npy"):
            # A second write: in place it keeps the file (its inode), else it replaces it.
            ino = os.stat(os.path.join(d, name)).st_ino
            world.write_file(os.path.join(d, name), mine, spec, **kw)
            same = os.stat(os.path.join(d, name)).st_ino == ino
            assert same == (name == "p.npy"), (name, same)
        print("wrote", name)
else:
    for name in FORMATS:
        want = part(glob, spec, me)
        got = world.read_file(os.path.join(d, name), spec)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
        assert np.array_equal(got, want), name
        out = np.full_like(want, -1.0, order="F" if "order=F" in spec else "C")
        assert world.read_file(os.path.join(d, name), spools.Layout(spec), out=out) is out
        assert np.array_equal(out, want), name
        print("read", name)
