"""Point-to-point with Python code inside progress and with threads (2 ranks; run with
SPOOLS_PROGRESS_THREAD=1 and without). Prints "threads ok" on each rank.

1. Two ranks flood each other with eager sends (their rings fill) while RPC calls are in
   flight: a send waiting for ring room must not keep the GIL the progress thread needs
   to run the RPC function (it hung: finding 1).
2. wait_any on a request another thread's wait() holds: no blocking lock with the GIL
   held (deadlock), and a request that thread finishes counts as the hit (finding 2).
3. An RPC function that calls p2p or a collective gets a clear RuntimeError instead of
   hanging its rank (finding 12).
"""
import threading

import numpy as np

import spools

world = spools.init()
me = world.rank
assert world.size == 2, "needs two ranks"
other = 1 - me


@world.rpc
def ping(x):
    return x + 1


@world.rpc
def misuse(what):
    """Calls that wait, from inside an RPC function: each must raise RuntimeError."""
    calls = {
        "send": lambda: world.Send(np.zeros(1), other, 3),
        "recv": lambda: world.Recv(np.zeros(1), other, 3),
        "barrier": world.barrier,
        "probe": lambda: world.probe(other, 3),
        "wait": lambda: world.Irecv(np.zeros(1), other, 3).wait(),
        "wait_all": lambda: spools.wait_all([]),
        "wait_any": lambda: spools.wait_any([]),
    }
    try:
        calls[what]()
    except RuntimeError as e:
        return str(e)
    return "no error"


world.barrier()

# 1. The flood.
N = 2000
msg = np.full(2048, float(me))  # 16 KiB: eager
calls, sends = [], []
for i in range(N):
    if i % 50 == 0:
        calls.append(world.call_async(other, "ping", i))
    if i % 2:
        world.Send(msg, other, 1)
    else:
        sends.append(world.Isend(msg, other, 1))
buf = np.empty(2048)
for i in range(N):
    world.Recv(buf, other, 1)
    assert (buf == other).all()
assert all(st.count == msg.nbytes for st in spools.wait_all(sends))
rpc = [r.result() for r in calls]
assert rpc == [i + 1 for i in range(0, N, 50)], rpc
world.barrier()

# 2. wait_any against another thread's wait. Rank 0's thread waits for the message
# first; rank 0 then asks rank 1 for it and calls wait_any at once (the message needs a
# round trip, so wait_any normally sees the request pending and held by the thread).
if me == 0:
    for round_ in range(3):
        data = np.zeros(4)
        req = world.Irecv(data, 1, 5)
        started = threading.Event()
        got = []

        def waiter():
            started.set()
            got.append(req.wait())

        t = threading.Thread(target=waiter)
        t.start()
        started.wait()
        world.Send(np.zeros(1), 1, 6)  # "send it now"
        try:
            i, st = spools.wait_any([req])
            assert i == 0 and st.source == 1 and st.tag == 5 and st.count == 32, (i, st)
        except ValueError as e:
            # The thread finished it before wait_any looked: nothing was pending.
            assert "pending" in str(e), e
        t.join()
        assert got and got[0].count == 32 and (data == round_ + 1).all(), (got, data)
else:
    for round_ in range(3):
        world.Recv(np.zeros(1), 0, 6)
        world.Send(np.full(4, float(round_ + 1)), 0, 5)
world.barrier()

# 3. Spools calls inside an RPC function.
if me == 0:
    for what in ["send", "recv", "barrier", "probe", "wait", "wait_all", "wait_any"]:
        m = world.call(1, "misuse", what)
        assert "inside an RPC function" in m, (what, m)
world.barrier()
print("threads ok", flush=True)
world.finalize()
