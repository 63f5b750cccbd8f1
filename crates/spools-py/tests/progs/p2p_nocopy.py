"""Zero copy: a 64 MiB array sent with Send, Isend and send (inside an object) makes no
Python-side copy (tracemalloc's peak, which counts numpy's buffers, stays far below the
array's size), and the receives fill the caller's array in place (same data pointer, same
object)."""
import tracemalloc

import numpy as np
import spools

world = spools.init()
me, n = world.rank, world.size
SIZE = 64 << 20
count = SIZE // 8
LIMIT = 1 << 20  # a copy would be 64 MiB


def addr(a):
    return a.__array_interface__["data"][0]


if me == 0:
    a = np.arange(count, dtype=np.float64)
    for dest in range(1, n):
        tracemalloc.start()
        world.Send(a, dest, 1)
        r = world.Isend(a, dest, 2)
        r.wait()
        world.send({"big": a, "label": "x"}, dest, 3)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < LIMIT, "send side: peak %d bytes" % peak
        print("send peak below limit for %d" % dest)
else:
    b = np.zeros(count, dtype=np.float64)
    p, ident = addr(b), id(b)
    tracemalloc.start()
    st = world.Recv(b, 0, 1)
    assert addr(b) == p and st.count == SIZE
    assert b[0] == 0 and b[-1] == count - 1 and b[count // 2] == count // 2
    b[:] = -1
    r = world.Irecv(b, 0, 2)
    r.wait()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert addr(b) == p and id(b) == ident
    assert np.array_equal(b, np.arange(count, dtype=np.float64))
    assert peak < LIMIT, "receive side: peak %d bytes" % peak
    o = world.recv(0, 3)
    assert o["label"] == "x" and o["big"][-1] == count - 1
    print("recv in place, peak below limit")
world.barrier()
world.finalize()
