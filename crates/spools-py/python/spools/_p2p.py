"""Pure-Python part of the p2p area (see src/p2p.rs): object messaging.

``Comm.send_obj(obj, dest, tag)`` pickles ``obj`` with protocol 5; the buffers pickle
hands out of band (numpy arrays, ``pickle.PickleBuffer``) are sent as messages of their
own, straight from their memory, and received straight into new ``bytearray`` objects
that the unpickled object then uses: no copy of array data on either side through
Python objects. The first message carries a small header (the number and sizes of the
out-of-band buffers) and the in-band pickle; the others follow from the same rank with
the same tag, so ``recv_obj(ANY_SOURCE, ANY_TAG)`` takes them from whoever sent the
first.
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
    comm.send(head + data, dest, tag)
    for v in views:
        comm.send(v, dest, tag)


def _recv_obj(comm, source, tag):
    st = comm.probe(source, tag)
    first = bytearray(st.count)
    comm.recv(first, st.source, st.tag)
    (n,) = _HEADER.unpack_from(first, 0)
    sizes = [_HEADER.unpack_from(first, 8 * (i + 1))[0] for i in range(n)]
    start = 8 * (n + 1)
    bufs = []
    for size in sizes:
        b = bytearray(size)
        comm.recv(b, st.source, st.tag)
        bufs.append(b)
    return pickle.loads(memoryview(first)[start:], buffers=bufs)
