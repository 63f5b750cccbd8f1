"""A job streaming 3 ADUs of a 30x7 float64 dataset to DEST over 2 links: ADU k is
arange(210) + 1000 k, sent from rows in blocks, then columns cyclic (any layout of the
ADU's size; ADU 1 from an order=F layout, F-contiguous shares); after the stream, every
call raises FinalizedError once the job finalized. argv: DEST [MODE]; MODE "die" raises inside the `with` after 2 ADUs, with
a window of 1 ADU (so the first one has left when the second send returns)."""
import sys

import numpy as np

import spools

dest = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
world = spools.init()
me, p = world.rank, world.size
rows = spools.Layout("f64[30,7] block,* on %dx1" % p)  # a Layout or a spec string
cols = "f64[30,7] *,cyclic on 1x%d" % p
b = -(-30 // p)


def full(k):
    return (np.arange(210, dtype=np.float64) + 1000 * k).reshape(30, 7)


with world.stream_open(dest, links=2, tu=560, window=1 if mode == "die" else 2) as s:
    assert s.dest == dest.replace("tcp:", "")
    s.send(np.ascontiguousarray(full(0)[me * b:(me + 1) * b]), rows)
    s.send(np.asfortranarray(full(1)[:, me::p]), cols + " order=F")
    if mode == "die":
        raise RuntimeError("the sender fails after 2 ADUs")
    # A wrong share on one rank fails the call on every rank (no hang), with that rank's
    # class (a ValueError) and message; the others name the rank.
    bad = np.zeros(3) if me == p - 1 else np.ascontiguousarray(full(2)[me * b:(me + 1) * b])
    try:
        s.send(bad, rows)
    except ValueError as e:
        assert "shape" in str(e), str(e)
        assert me == p - 1 or "rank %d" % (p - 1) in str(e), str(e)
    else:
        raise AssertionError("a wrong share was sent")
    s.send(np.ascontiguousarray(full(2)[me * b:(me + 1) * b]), rows)
    assert s.adus == 3
world.finalize()
calls = [lambda: s.send(full(0), rows), s.close,
         lambda: world.stream_open(dest, links=1)]
for i, call in enumerate(calls):
    try:
        call()
    except spools.FinalizedError:
        pass
    else:
        raise AssertionError("call %d after finalize: no FinalizedError" % i)
print("sent 3")
