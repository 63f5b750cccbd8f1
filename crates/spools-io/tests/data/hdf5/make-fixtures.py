#!/usr/bin/env python3
"""Writes the HDF5 fixtures of crates/spools-io/tests/hdf5_hostile.rs (h5py and numpy).

Run from this folder: python3 make-fixtures.py. Files are written with
libver="earliest" so that libhdf5 1.10 (the oldest Spools accepts) reads them.
"""
import h5py
import numpy as np


def new(name, **kw):
    return h5py.File(name, "w", libver="earliest", **kw)


# External links: link.h5's /d is target.h5's /d ([0, 1, 2, 3]), /g its group /grp; /s
# a soft link to /d and /h/r a relative one to /h/x, an external link to /d (external
# links crossed behind soft ones); /own is a dataset of link.h5 itself, large enough
# that the targets' offsets (2048 and 2080) lie within link.h5 (where a reader that
# ignores the link would read, with success).
with new("target.h5") as f:
    f["d"] = np.arange(4, dtype="<i8")
    f.create_group("grp")["e"] = np.arange(5, dtype="<i4") * 3
with new("link.h5") as f:
    f["d"] = h5py.ExternalLink("target.h5", "/d")
    f["g"] = h5py.ExternalLink("target.h5", "/grp")
    f["s"] = h5py.SoftLink("/d")
    f.create_group("h")["x"] = h5py.ExternalLink("target.h5", "/d")
    f["h/r"] = h5py.SoftLink("x")
    f["own"] = np.arange(64, dtype="<i2") + 1000

# A user block of 512 bytes (some text in it, as a tool using it would leave) and one
# of 2048 bytes: the HDF5 signature follows it.
with new("userblock512.h5", userblock_size=512) as f:
    f["d"] = np.arange(10, dtype="<i4") * 7 - 20
with open("userblock512.h5", "r+b") as f:
    f.write(b"a user block, as written by a tool that keeps its own header here\n")
with new("userblock2048.h5", userblock_size=2048) as f:
    f.create_group("g")["d"] = (np.arange(12, dtype="<f8") * 0.5).reshape(3, 4)
    f["other"] = np.zeros(2, dtype="<u1")

# A dataset whose data lies in an external raw file (ext_raw.bin), not in the file.
np.arange(10, dtype="<i4").tofile("ext_raw.bin")
with new("external_raw.h5") as f:
    f.create_dataset("d", shape=(10,), dtype="<i4", external=[("ext_raw.bin", 0, 40)])

# An empty dataset (shape (0, 10)): no storage allocated.
with new("empty.h5") as f:
    f.create_dataset("d", shape=(0, 10), dtype="<f4")
