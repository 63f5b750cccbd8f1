"""Point-to-point on every kind of buffer, checked against numpy: a ring of blocking
sends, non-blocking calls with wait/test/wait_all/wait_any/cancel, ANY_SOURCE/ANY_TAG,
Sendrecv, probe/iprobe, large (rendezvous) messages, objects (send/recv, isend,
sendrecv), mpi4py's capitalised aliases; receives fill the caller's array in place; a
dropped request keeps its array alive."""
import gc
import sys

import numpy as np
import spools

world = spools.init()
me, n = world.rank, world.size
right, left = (me + 1) % n, (me - 1) % n


def data(rank, length, dtype, salt=0):
    x = (np.arange(length) * 7 + rank * 1000 + salt) % 251
    if np.dtype(dtype).kind == "c":
        return (x + 1j * (x + 1)).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return (x % 3 == 0)
    return x.astype(dtype)


def addr(a):
    return a.__array_interface__["data"][0]


# 1. A ring of blocking sends of every dtype and several sizes (short, eager,
# rendezvous), received in place. Even ranks send first (a rendezvous would deadlock
# if everyone sent first); with one rank, the ring is rank 0 to itself with isend.
for dtype in (np.float64, np.int32, np.uint8, np.complex128, np.bool_, np.float32):
    for length in (0, 1, 3, 1000, 100_000):
        mine = data(me, length, dtype)
        got = np.zeros(length, dtype)
        p = addr(got)
        tag = length % 1000 + 1
        if n == 1:
            r = world.Isend(mine, right, tag)
            st = world.Recv(got, left, tag)
            r.wait()
        elif me % 2 == 0:
            world.Send(mine, right, tag)
            st = world.Recv(got, left, tag)
        else:
            st = world.Recv(got, left, tag)
            world.Send(mine, right, tag)
        assert addr(got) == p, "receive moved the array"
        assert np.array_equal(got, data(left, length, dtype)), (dtype, length)
        assert (st.source, st.tag, st.count) == (left, tag, mine.nbytes), st
        assert st.get_count(dtype) == length

# 2. bytearray, memoryview and bytes as buffers.
msg = bytes([me, 1, 2, 3, 4, 5, 6, 7])
ba = bytearray(8)
r = world.Irecv(ba, left, 50)
world.Send(msg, right, 50)
r.wait()
assert ba == bytes([left, 1, 2, 3, 4, 5, 6, 7]), ba
mv = memoryview(bytearray(16))
r = world.Irecv(mv, left, 51)
world.Send(memoryview(bytearray(range(me, me + 16))), right, 51)
st = r.wait()
assert bytes(mv) == bytes(range(left, left + 16)) and st.count == 16
two_d = np.zeros((4, 5), dtype=np.int64)
r = world.Irecv(two_d, left, 52)
world.Send(np.arange(20, dtype=np.int64).reshape(4, 5) + left * 0 + me, right, 52)
r.wait()
assert np.array_equal(two_d, np.arange(20).reshape(4, 5) + left)

# 3. Non-blocking: irecv first, in place, wait_all, test, status.
bufs = [np.full(length, -1.0) for length in (1, 500, 50_000)]
ptrs = [addr(b) for b in bufs]
rreqs = [world.Irecv(b, left, 100 + i) for i, b in enumerate(bufs)]
assert all(r.status is None for r in rreqs) or n == 1
sends = [data(me, len(b), np.float64, salt=i) for i, b in enumerate(bufs)]
sreqs = [world.Isend(s, right, 100 + i) for i, s in enumerate(sends)]
sts = spools.wait_all(rreqs + sreqs)
for i, b in enumerate(bufs):
    assert addr(b) == ptrs[i]
    assert np.array_equal(b, data(left, len(b), np.float64, salt=i)), i
    assert (sts[i].source, sts[i].tag, sts[i].count) == (left, 100 + i, b.nbytes)
    assert rreqs[i].status.count == b.nbytes
    assert rreqs[i].test() is True
    assert rreqs[i].wait().count == b.nbytes  # again: the same status

# test() until complete.
b = np.zeros(10, dtype=np.int16)
r = world.Irecv(b, left, 200)
world.Send(np.arange(10, dtype=np.int16) * (me + 1), right, 200)
while not r.test():
    pass
assert np.array_equal(b, np.arange(10, dtype=np.int16) * (left + 1)) and r.status.tag == 200

# wait_any: two receives, the message of the second tag sent first... both come;
# every index is reported once.
b1, b2 = np.zeros(3), np.zeros(3)
reqs = [world.Irecv(b1, left, 301), world.Irecv(b2, left, 302)]
world.Send(np.full(3, 2.0 + me), right, 302)
world.Send(np.full(3, 1.0 + me), right, 301)
seen = set()
for _ in range(2):
    i, st = spools.wait_any(reqs)
    assert i not in seen and st.tag == 301 + i, (i, st)
    seen.add(i)
assert np.all(b1 == 1.0 + left) and np.all(b2 == 2.0 + left)
try:
    spools.wait_any(reqs)
    raise SystemExit("wait_any of finished requests did not raise")
except ValueError as e:
    assert "pending" in str(e)

# cancel an unmatched receive.
r = world.Irecv(np.zeros(4), left, 9999)
assert r.cancel() is True
assert r.wait().cancelled is True

# 4. ANY_SOURCE / ANY_TAG: rank 0 collects one message from every other rank.
world.barrier()
if me == 0:
    got = {}
    for _ in range(n - 1):
        b = np.zeros(2, dtype=np.int64)
        st = world.Recv(b, spools.ANY_SOURCE, spools.ANY_TAG)
        assert b[0] == st.source and b[1] == st.tag, (b, st)
        got[st.source] = st.tag
    assert got == {r: 400 + r for r in range(1, n)}, got
else:
    world.Send(np.array([me, 400 + me], dtype=np.int64), 0, 400 + me)
# (Nobody sends again before rank 0 has taken them all: it receives with ANY_TAG.)
world.barrier()

# 5. sendrecv around the ring, both directions, several sizes.
for length in (1, 4096, 200_000):
    out = np.zeros(length)
    st = world.Sendrecv(data(me, length, np.float64), right, out, left, sendtag=7, recvtag=7)
    assert np.array_equal(out, data(left, length, np.float64)) and st.source == left
    out2 = np.zeros(length)
    st = world.Sendrecv(data(me, length, np.float64, 1), left, out2, sendtag=8, recvtag=8)
    assert np.array_equal(out2, data(right, length, np.float64, 1)) and st.source == right

# 6. probe / iprobe.
world.barrier()
assert world.iprobe(left, 777) is None
world.Send(np.arange(6, dtype=np.float32), right, 600)
st = world.probe(left, 600)
assert (st.source, st.tag, st.count, st.get_count(np.float32)) == (left, 600, 24, 6)
st2 = world.iprobe(spools.ANY_SOURCE, 600)
assert st2 is not None and st2.count == 24
b = np.zeros(st.get_count(np.float32), dtype=np.float32)
world.Recv(b, st.source, st.tag)
assert np.array_equal(b, np.arange(6, dtype=np.float32))

# 7. A dropped request keeps its array alive: a large isend whose array and request
# are both dropped at once still delivers the data.
world.barrier()
big = data(me, 300_000, np.float64, 3)
r = world.Isend(big, right, 700)
del big, r
gc.collect()
got = np.zeros(300_000)
world.Recv(got, left, 700)
assert np.array_equal(got, data(left, 300_000, np.float64, 3))

# 8. Objects (pickle 5, arrays out of band). Alone, a rank sends to itself: a blocking
# send of a large array to itself would wait forever (as in MPI), so a small one.
olen = 1000 if n == 1 else 50_000
obj = {"rank": me, "name": "r%d" % me, "arr": data(me, olen, np.float64), "t": (1, [2, 3])}
if n == 1 or me % 2 == 0:
    world.send(obj, right, 800)
    o = world.recv(left, 800)
else:
    o = world.recv(spools.ANY_SOURCE, spools.ANY_TAG)
    world.send(obj, right, 800)
assert o["rank"] == left and o["name"] == "r%d" % left and o["t"] == (1, [2, 3])
assert np.array_equal(o["arr"], data(left, olen, np.float64))
world.send("hello %d" % me, right)
assert world.recv(left) == "hello %d" % left

# 9. Object isend (its request's wait() gives None) and sendrecv: every rank exchanges
# large objects with both neighbours at once, which a blocking send of each would
# deadlock (and alone, a rank to itself).
world.barrier()
big = {"rank": me, "arr": data(me, 300_000, np.float64, 9)}
req = world.isend(big, right, 900)
big["arr"][:] = -1  # pickled when the call started: changing it now is fine
o = world.recv(left, 900)
assert req.wait() is None and req.status is not None and req.test()
assert "isend" in repr(req)
assert o["rank"] == left and np.array_equal(o["arr"], data(left, 300_000, np.float64, 9))
assert spools.wait_all([world.isend([me], right, 901)])[0].count > 0
assert world.recv(left, 901) == [left]
o = world.sendrecv({"from": me, "arr": data(me, 200_000, np.float64, 10)}, right, sendtag=902,
                   source=left, recvtag=902)
assert o["from"] == left and np.array_equal(o["arr"], data(left, 200_000, np.float64, 10))
assert world.sendrecv(me, dest=left, source=right) == right
# mpi4py's other spellings of probe, iprobe, barrier, ibarrier.
world.Send(np.arange(3.0), right, 903)
assert world.Probe(left, 903).count == 24 and world.Iprobe(left, 903).count == 24
world.Recv(np.zeros(3), left, 903)
assert world.Iprobe(left, 903) is None
world.Barrier()
assert world.Ibarrier().wait() is None
# Requests of buffers give their Status.
rq = world.Irecv(np.zeros(2), left, 904)
sq = world.Isend(np.ones(2), right, 904)
assert sq.wait().count == 16 and rq.wait().count == 16 and "Irecv" in repr(rq)
# The old names are gone.
for old in ("send_obj", "recv_obj", "bcast_obj", "gather_obj", "allgather_obj", "scatter_obj"):
    assert not hasattr(world, old), old

world.barrier()
print("p2p ok rank %d" % me)
world.finalize()
