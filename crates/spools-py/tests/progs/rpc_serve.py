"""RPC served by a rank that is not calling: blocked in a wait (argv[1] == "blocked"),
already finalising ("finalized"), or busy in Python with the progress thread serving
("busy", run with SPOOLS_PROGRESS_THREAD=1). Rank 0 calls every other rank."""
import sys
import threading

import numpy as np

import spools

mode = sys.argv[1]
world = spools.init()
me, n = world.rank, world.size
state = {"calls": 0, "stop": False, "threads": set()}


@world.rpc
def add(a):
    state["calls"] += 1
    state["threads"].add(threading.current_thread() is threading.main_thread())
    return a + me


@world.rpc
def stop():
    state["stop"] = True
    return state["calls"]


world.barrier()  # every rank has registered
K = 10
if me == 0:
    for r in range(1, n):
        for i in range(K):
            x = np.full(3, i, dtype=np.int32)
            assert np.array_equal(world.call(r, "add", x), x + r)
        assert world.call(r, "stop") == K
    print("served %d" % (n - 1))
    if mode == "blocked" and hasattr(world, "Send"):
        for r in range(1, n):
            world.Send(np.zeros(1), dest=r, tag=5)
    if mode != "finalized":
        world.barrier()
elif mode == "blocked":
    # The calls arrive while this rank waits (the GIL released).
    if hasattr(world, "Recv"):
        world.Recv(np.empty(1), source=0, tag=5)
    world.barrier()
    assert state["stop"] and state["calls"] == K
    print("ran on main thread: %s" % sorted(state["threads"]))
elif mode == "finalized":
    world.finalize()  # serves calls until every rank has finalised
    assert state["stop"] and state["calls"] == K
elif mode == "busy":
    # Pure Python work, no Spools call: the progress thread runs the calls.
    spins = 0
    while not state["stop"]:
        spins = (spins + 1) % 1000003
    assert state["calls"] == K
    print("ran on main thread: %s" % sorted(state["threads"]))
    world.barrier()
if not spools.finalized():
    world.finalize()
try:
    world.call(me, "add", 1)
except spools.FinalizedError:
    print("done")
