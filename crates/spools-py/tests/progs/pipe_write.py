"""The producer of the pipe tests: RECORDS records of a 12x10 float64 dataset, rows
block-distributed over the ranks; record k is (arange(120) + 1000 k) reshaped.
argv: NAME RECORDS [MODE]; NAME "-" takes the launcher's choice (then the report goes
to stderr: stdout may be the pipe); MODE "die" raises inside the `with` block after 2 records,
"mismatch" opens with another dataset shape, "F" sends RECORDS records over an order=F
layout (F-contiguous shares) then over a C one to a reader whose layouts are the other
way round (pipes NAME and NAME-2), then checks every call raises FinalizedError after
finalize."""
import sys

import numpy as np

import spools

name, records = sys.argv[1], int(sys.argv[2])
log = sys.stdout
if name == "-":
    name, log = None, sys.stderr
mode = sys.argv[3] if len(sys.argv) > 3 else "ok"
world = spools.init()
me, p = world.rank, world.size
layout = "f64[12,10] block,* on %dx1" % p
rows = -(-12 // p)  # block: ceil(12 / p) rows per rank


def share(k):
    full = (np.arange(120, dtype=np.float64) + 1000 * k).reshape(12, 10)
    return np.ascontiguousarray(full[me * rows:(me + 1) * rows])


if mode == "mismatch":
    try:
        spools.PipeWriter(name, "f64[12,11] block,* on %dx1" % p)
    except spools.LayoutError as e:
        print("layout error: %s" % ("hold different datasets" in str(e)))
    sys.exit(0)

if mode == "F":
    with world.pipe_writer(name, layout + " order=F") as w:
        try:  # a C-contiguous share of more than one column: not the layout's order
            w.write(share(0))
        except ValueError as e:
            assert "F-contiguous" in str(e), str(e)
        else:
            raise AssertionError("a C-contiguous share was taken for an order=F layout")
        for k in range(records):
            w.write(np.asfortranarray(share(k)))
    with spools.PipeWriter(name + "-2", layout) as w2:
        for k in range(records):
            w2.write(share(k))
    world.finalize()
    calls = [lambda: w.write(np.asfortranarray(share(0))), w.close, w2.close,
             lambda: world.pipe_writer(name + "-3", layout),
             lambda: spools.PipeWriter(name + "-3", layout)]
    for i, call in enumerate(calls):
        try:
            call()
        except spools.FinalizedError:
            pass
        else:
            raise AssertionError("call %d after finalize: no FinalizedError" % i)
    print("F wrote %d" % records, file=log)
    sys.exit(0)

with world.pipe_writer(name, spools.Layout(layout)) as w:  # a Layout or a spec string
    assert w.name == (name or w.name) and w.layout == layout
    # Wrong arguments, refused before anything is sent.
    for bad, exc in [(np.zeros((rows, 10), dtype=np.float32), TypeError),
                     (np.zeros((rows + 1, 10)), ValueError),
                     (np.zeros((10, 12))[:, :rows * 10 // 12 or 1].T, ValueError)]:
        try:
            w.write(bad)
        except exc as e:
            assert "shape" in str(e) or "dtype" in str(e) or "contiguous" in str(e), str(e)
        else:
            raise AssertionError("no %s" % exc.__name__)
    for k in range(records):
        if mode == "die" and k == 2:
            raise RuntimeError("the producer fails after 2 records")
        a = share(k)
        w.write(a if k % 2 else a.ravel())  # any shape of the share's size
    assert w.records == records
print("wrote %d" % records, file=log)
