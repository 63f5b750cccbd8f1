"""Wrong arguments are TypeError/ValueError naming the expected and the given; runtime
failures are the spools.errors classes: TruncatedError for a too small receive buffer
(blocking and non-blocking), FinalizedError for a call after finalize."""
import numpy as np
import spools
from spools import errors

world = spools.init()
me, n = world.rank, world.size
right, left = (me + 1) % n, (me - 1) % n


def raises(kind, words, f, *args, **kw):
    try:
        f(*args, **kw)
    except kind as e:
        text = str(e)
        for w in words:
            assert w in text, "%r not in %r" % (w, text)
        return e
    raise AssertionError("%s did not raise %s" % (getattr(f, "__name__", f), kind.__name__))


a = np.arange(20.0)
# Non-contiguous: names C-contiguous, the shape and the strides.
raises(ValueError, ["C-contiguous", "(10,)", "(16,)"], world.Send, a[::2], right)
raises(ValueError, ["C-contiguous", "(4, 2)"], world.Recv, np.zeros((4, 4))[:, :2], left)
raises(ValueError, ["C-contiguous"], world.Isend, np.zeros((3, 3)).T[:, :2], right)
# Read-only receive buffers.
ro = np.zeros(4)
ro.setflags(write=False)
raises(ValueError, ["read-only", "receive buffer"], world.Recv, ro, left)
raises(ValueError, ["read-only"], world.Irecv, b"abcd", left)
raises(ValueError, ["read-only"], world.Sendrecv, a, right, bytes(8), left)
# Object dtype and objects without the buffer protocol.
raises(TypeError, ["dtype object", "lower-case send/recv"], world.Send, np.array([1, "x"], dtype=object), right)
raises(TypeError, ["buffer protocol", "int"], world.Send, 42, right)
raises(TypeError, ["buffer protocol", "list"], world.Isend, [1.0, 2.0], right)
# Bad ranks and tags: the valid range and the value given.
raises(ValueError, ["dest", "0 to %d" % (n - 1), "got %d" % n], world.Send, a, n)
raises(ValueError, ["dest", "got -1"], world.Isend, a, -1)
raises(ValueError, ["source", "got -2"], world.Recv, a, -2)
raises(ValueError, ["source", "got %d" % (n + 3)], world.probe, n + 3)
raises(ValueError, ["tag", "got -1"], world.Send, a, right, -1)
raises(ValueError, ["tag", "got %d" % 2**31], world.Send, a, right, 2**31)
raises(ValueError, ["tag", "got -7"], world.Recv, a, left, -7)
raises(ValueError, ["tag", "got -3"], world.iprobe, left, -3)
# Sendrecv into its own send buffer.
raises(ValueError, ["overlap"], world.Sendrecv, a, right, a, left)
raises(ValueError, ["overlap"], world.Sendrecv, a[:10], right, a[5:], left)
# wait_all of something that is not a request.
raises(TypeError, ["Request", "int"], spools.wait_all, [1])
# get_count of a dtype that does not divide the message.
world.Send(np.zeros(3, dtype=np.uint8), me, 5)
st = world.Recv(np.zeros(3, dtype=np.uint8), me, 5)
raises(ValueError, ["3 bytes", "float64"], st.get_count, np.float64)

# Truncation: blocking and non-blocking; the error names both sizes; nothing past the
# buffer is written.
world.barrier()
world.Send(np.arange(16, dtype=np.int64), right, 9)
big = np.full(12, -1, dtype=np.int64)
small = big[:8]
e = raises(spools.TruncatedError, ["128", "64"], world.Recv, small, left, 9)
assert isinstance(e, errors.SpoolsError) and isinstance(e, spools.SpoolsError)
assert np.all(big[8:] == -1), big
s = world.Isend(np.arange(10000, dtype=np.int64), right, 10)  # rendezvous size
r = world.Irecv(np.zeros(100, dtype=np.int64), left, 10)
raises(spools.TruncatedError, ["80000", "800"], r.wait)
raises(spools.TruncatedError, ["80000", "800"], r.wait)  # again: the same error
assert r.test() is True and r.status is None
assert s.wait().count == 80000  # the sender is done: the receiver discarded the rest

pending = world.Irecv(np.zeros(2), left, 4321)  # never matched
world.barrier()
world.finalize()
raises(spools.FinalizedError, ["finalize"], pending.wait)
raises(spools.FinalizedError, ["finalize"], pending.test)
raises(spools.FinalizedError, ["finalize"], spools.wait_all, [pending])
raises(spools.FinalizedError, ["finalize"], spools.wait_any, [pending])
# After finalize: FinalizedError, from every kind of call.
raises(spools.FinalizedError, ["finalize"], world.Send, a, right)
raises(spools.FinalizedError, ["finalize"], world.Recv, a, left)
raises(spools.FinalizedError, ["finalize"], world.Isend, a, right)
raises(spools.FinalizedError, ["finalize"], world.barrier)
raises(spools.FinalizedError, ["finalize"], world.iprobe)
raises(spools.FinalizedError, ["finalised"], spools.init)
print("errors ok rank %d" % me)
