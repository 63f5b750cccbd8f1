"""The consumer of the pipe tests: reads the records of pipe_write.py with the columns
cyclic over its ranks and checks each against numpy. argv: NAME [MODE]; NAME "-" takes the launcher's choice; MODE "die"
expects the producer to go away after 2 records, "mismatch" opens with another shape,
"F" reads pipe_write.py's "F" mode: a C layout, then an order=F one (F-contiguous
arrays, checked against numpy), then checks every call raises FinalizedError after
finalize."""
import sys

import numpy as np

import spools

name = None if sys.argv[1] == "-" else sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
world = spools.init()
me, p = world.rank, world.size
layout = "f64[12,10] *,cyclic on 1x%d" % p


def expect(k):
    full = (np.arange(120, dtype=np.float64) + 1000 * k).reshape(12, 10)
    return full[:, me::p]


if mode == "mismatch":
    try:
        spools.PipeReader(name, layout)
    except spools.LayoutError as e:
        print("layout error: %s" % ("hold different datasets" in str(e)))
    sys.exit(0)

if mode == "F":
    n = 0
    with spools.PipeReader(name, layout) as r:
        for rec in r:
            assert rec.flags.c_contiguous and np.array_equal(rec, expect(n)), (n, rec)
            n += 1
    with world.pipe_reader(name + "-2", layout + " order=F") as r2:
        try:  # a C-contiguous out of more than one column: not the layout's order
            r2.read(out=np.zeros(expect(0).shape))
        except ValueError as e:
            assert "F-contiguous" in str(e), str(e)
        else:
            raise AssertionError("a C-contiguous out was taken for an order=F layout")
        out = np.asfortranarray(np.zeros(expect(0).shape))
        assert r2.read(out=out) is out and np.array_equal(out, expect(0)), out
        m = 1
        for rec in r2:
            assert rec.flags.f_contiguous and rec.shape == expect(m).shape
            assert np.array_equal(rec, expect(m)), (m, rec)
            m += 1
    world.finalize()
    calls = [r.read, r.close, r2.read, r2.close, lambda: next(r2),
             lambda: world.pipe_reader(name + "-3", layout),
             lambda: spools.PipeReader(name + "-3", layout)]
    for i, call in enumerate(calls):
        try:
            call()
        except spools.FinalizedError:
            pass
        else:
            raise AssertionError("call %d after finalize: no FinalizedError" % i)
    print("F read %d %d" % (n, m))
    sys.exit(0)

n = 0
try:
    with spools.PipeReader(name, layout) as r:
        for bad, exc in [(np.zeros(3), ValueError), (np.zeros((12, 4), dtype=np.int64), TypeError)]:
            try:
                r.read(out=bad)
            except exc as e:
                assert "shape" in str(e) or "dtype" in str(e), str(e)
            else:
                raise AssertionError("a wrong out was taken")
        # The first record into a caller's array, in place.
        out = np.full((12, len(range(me, 10, p))), -1.0)
        got = r.read(out=out)
        if got is not None:
            assert got is out
            assert np.array_equal(out, expect(0)), out
            n = 1
            for rec in r:  # the others as new arrays, until the producer closes
                assert rec.shape == out.shape and rec.dtype == np.float64
                assert np.array_equal(rec, expect(n)), (n, rec)
                n += 1
        assert r.read() is None  # the end, again
        assert r.records == n
    print("read %d" % n)
except spools.PeerGoneError as e:
    assert mode == "die", e
    print("producer gone after %d: %s" % (n, "producer rank" in str(e)))
