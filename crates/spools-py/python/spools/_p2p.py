"""Pure-Python part of the p2p area (see src/p2p.rs): object messaging.

As in mpi4py, the lower-case ``Comm.send/recv/isend/sendrecv`` take any picklable object
and the capitalised ``Send/Recv/Isend/Irecv/Sendrecv`` take buffers, used in place.

``Comm.send(obj, dest, tag)`` pickles ``obj`` with protocol 5; the buffers pickle hands
out of band (numpy arrays, ``pickle.PickleBuffer``) are sent as messages of their own,
straight from their memory, and received straight into new ``bytearray`` objects that
the unpickled object then uses: no copy of array data on either side through Python
objects. The first message carries a small header (the number and sizes of the
out-of-band buffers) and the in-band pickle; the others follow from the same rank with
the same tag, so ``recv(ANY_SOURCE, ANY_TAG)`` takes them from whoever sent the first.

``Comm.isend(obj, dest, tag)`` sends one message, the header saying no out-of-band
buffer and the whole pickle (arrays copied into it), with ``Isend``: its request is the
one request of the operation. ``Comm.sendrecv`` is that ``isend``, then ``recv``, then
the request's wait, so two ranks exchanging objects cannot deadlock.
"""

import pickle
import struct

__all__ = []

_HEADER = struct.Struct("<Q")


def _send_obj(comm, obj, dest, tag):
    bufs = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=bufs.append)
    views = [b.raw() for b in bufs]
    head = _HEADER.pack(len(views)) + b"".join(_HEADER.pack(v.nbytes) for v in views)
    comm.Send(head + data, dest, tag)
    for v in views:
        comm.Send(v, dest, tag)


def _pickle_in_band(obj):
    return _HEADER.pack(0) + pickle.dumps(obj, protocol=5)


def _recv_obj(comm, source, tag):
    st = comm.probe(source, tag)
    first = bytearray(st.count)
    comm.Recv(first, st.source, st.tag)
    (n,) = _HEADER.unpack_from(first, 0)
    sizes = [_HEADER.unpack_from(first, 8 * (i + 1))[0] for i in range(n)]
    start = 8 * (n + 1)
    bufs = []
    for size in sizes:
        b = bytearray(size)
        comm.Recv(b, st.source, st.tag)
        bufs.append(b)
    return pickle.loads(memoryview(first)[start:], buffers=bufs)


def _sendrecv_obj(comm, obj, dest, sendtag, source, recvtag):
    req = comm.isend(obj, dest, sendtag)
    got = _recv_obj(comm, source, recvtag)
    req.wait()
    return got
