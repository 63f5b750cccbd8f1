"""`files_damaged.py PATH SPEC [START STOP]`: reads a parallel file that may be damaged,
collectively (every rank prints `read ok` when every value is the reference's, else
`read raised CLASS`) and, on rank 0, with spools.open: the whole file (`open ...`) and
rows START:STOP (`slice ...`)."""

import sys

import numpy as np

import spools
from layout_ref import global_array, part

world = spools.init()
path, spec = sys.argv[1], sys.argv[2]
glob = global_array(spec, seed=3)
want = part(glob, spec, world.rank)


def attempt(what, fn, want):
    try:
        got = fn()
    except spools.SpoolsError as e:
        print(what, "raised", type(e).__name__, str(e).replace("\n", " "))
    else:
        assert np.array_equal(got, want), what
        print(what, "ok")


attempt("read", lambda: world.read_file(path, spec), want)
if world.rank == 0:
    with spools.open(path) as f:
        attempt("open", lambda: f[()], glob)
        if len(sys.argv) > 3:
            a, b = int(sys.argv[3]), int(sys.argv[4])
            attempt("slice", lambda: f[a:b, :], glob[a:b])
