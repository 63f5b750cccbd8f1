"""RPC: a ring of calls, calls to self, many concurrent async calls, large arguments,
an exception, an unknown name, wrong arguments. Prints "ok" on each rank."""
import numpy as np

import spools

world = spools.init()
me, n = world.rank, world.size


@world.rpc
def scale(a, k=1):
    return a * k + me


@world.rpc("whoami")
def _who():
    return me


@world.rpc
def echo(*args, **kwargs):
    return args, kwargs


def boom(x):
    raise ValueError("bad value %d" % x)


world.register_rpc("boom", boom)
calls = {"n": 0}


def bump(by=1):
    calls["n"] += by
    return calls["n"]


world.register_rpc("bump", bump)


@world.rpc
def ctrl_c():
    raise KeyboardInterrupt


@world.rpc
def nested():
    return world.call(me, "whoami")  # refused: the progress running it cannot wait


world.barrier()  # every rank has registered

nxt = (me + 1) % n
# A ring of calls: numpy arrays in and out, keyword arguments.
a = np.arange(1000, dtype=np.float64)
r = world.call(nxt, "scale", a, k=3)
assert isinstance(r, np.ndarray) and r.dtype == np.float64
assert np.array_equal(r, a * 3 + nxt), r[:5]
# Keyword arguments named like call's own parameters go to the function.
assert world.call(nxt, "echo", 1, rank=2, name="n") == ((1,), {"rank": 2, "name": "n"})
# A call to this rank itself.
assert world.call(me, "whoami") == me
# Many calls in flight at once, to every rank.
reqs = [(i, t, world.call_async(t, "scale", np.full(10, i, dtype=np.int64), k=2))
        for i in range(25) for t in range(n)]
for i, t, q in reqs:
    assert (q.rank, q.name) == (t, "scale")
    assert np.array_equal(q.wait(), np.full(10, i) * 2 + t)
    assert q.done()
    assert np.array_equal(q.result(), np.full(10, i) * 2 + t)  # again: the same result
# Calls from several Python threads at once (each waits with the GIL released; the
# functions run on whichever thread progresses).
import threading  # noqa: E402

errors = []


def worker(t):
    try:
        for i in range(10):
            x = np.full(4, 10 * t + i, dtype=np.int64)
            got = world.call((me + t) % n, "scale", x, k=3)
            assert np.array_equal(got, x * 3 + (me + t) % n), got
    except BaseException as e:  # noqa: BLE001 (reported below)
        errors.append(e)


threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
# Large arguments and results (rendezvous messages both ways).
b = np.random.default_rng(me).random(1 << 17)
assert np.array_equal(world.call(nxt, "scale", b), b + nxt)
# An exception in the remote function.
try:
    world.call(nxt, "boom", 7)
except spools.RemoteError as e:
    assert e.rank == nxt and e.name == "boom", (e.rank, e.name)
    assert e.remote_type == "ValueError", e.remote_type
    assert e.remote_message == "bad value 7", e.remote_message
    assert "raise ValueError" in e.remote_traceback, e.remote_traceback
    assert "in boom" in e.remote_traceback, e.remote_traceback
    assert "rank %d" % nxt in str(e) and "bad value 7" in str(e)
else:
    raise AssertionError("no RemoteError")
q = world.call_async(nxt, "boom", 8)
for _ in range(2):  # raised by every wait
    try:
        q.result()
    except spools.RemoteError as e:
        assert e.remote_message == "bad value 8"
    else:
        raise AssertionError("no RemoteError")
# An RPC function that calls Spools is refused (instead of waiting forever).
try:
    world.call(nxt, "nested")
except spools.RemoteError as e:
    assert e.remote_type == "RuntimeError" and "inside an RPC function" in e.remote_message, e
else:
    raise AssertionError("no RemoteError")
# An unknown name.
try:
    world.call(nxt, "nope")
except spools.UnknownRpcError as e:
    assert isinstance(e, spools.SpoolsError) and isinstance(e, LookupError)
    assert "nope" in str(e) and ("rank %d" % nxt) in str(e), str(e)
else:
    raise AssertionError("no UnknownRpcError")
# Wrong arguments.
for bad, exc in [(lambda: world.register_rpc("boom", boom), ValueError),
                 (lambda: world.register_rpc("", boom), ValueError),
                 (lambda: world.register_rpc("x", 3), TypeError),
                 (lambda: world.call(n, "bump"), ValueError),
                 (lambda: world.call(-1, "bump"), ValueError),
                 (lambda: world.call(0, "x" * 300), ValueError)]:
    try:
        bad()
    except exc:
        pass
    else:
        raise AssertionError("no %s" % exc.__name__)
# A result that does not pickle comes back as a RemoteError.
world.register_rpc("unpicklable", lambda: (lambda: 0))
world.barrier()
try:
    world.call(nxt, "unpicklable")
except spools.RemoteError as e:
    assert e.rank == nxt
else:
    raise AssertionError("no RemoteError")
# Every rank was called by its predecessor's bumps only.
world.barrier()
world.call(nxt, "bump", by=5)
world.barrier()
assert calls["n"] == 5, calls
# A sub-communicator: ranks are its own (names are shared by the process).
sub = world.split(0, key=-me)  # reversed order
assert sub.call(0, "whoami") == n - 1  # sub rank 0 is world rank n - 1
# Ctrl-C during an RPC function (here raised by the function itself): the caller gets a
# RemoteError, and the target's own program its KeyboardInterrupt, in the wait it is in.
if n >= 2 and me < 2:
    if me == 0:
        world.Recv(np.empty(1), 1, 30)  # rank 1 is about to wait
        try:
            world.call(1, "ctrl_c")
        except spools.RemoteError as e:
            assert e.remote_type == "KeyboardInterrupt", e
        else:
            raise AssertionError("no RemoteError")
    else:
        try:
            world.Send(np.zeros(1), 0, 30)
            # A message that never comes: only the interrupt ends this wait (in which
            # the call is served).
            world.Recv(np.empty(1), 0, 32)
        except KeyboardInterrupt:
            print("rank 1 interrupted")
print("ok")
