"""`files_damaged.py PATH SPEC`: reads a parallel file that may be damaged; prints
`ok` when every value is the reference's, else the exception class this rank raised."""

import sys

import numpy as np

import spools
from layout_ref import global_array, part

world = spools.init()
path, spec = sys.argv[1], sys.argv[2]
want = part(global_array(spec, seed=3), spec, world.rank)
try:
    got = world.read_file(path, spec)
except spools.SpoolsError as e:
    print("raised", type(e).__name__, str(e).replace("\n", " "))
else:
    assert np.array_equal(got, want)
    print("ok")
