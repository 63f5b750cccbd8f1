"""A job receiving a stream. argv: MODE ...
- "python": ADUs of stream_send.py, received with the columns cyclic, checked against
  numpy; "python-die": the sender goes away after 1 ADU.
- "spools-send SPOOLS FILE...": rank 0 starts `spools send FILE... tcp:ADDR`; each file
  is an ADU of its own stream, received as bytes in blocks (the default) and checked."""
import subprocess
import sys

import numpy as np

import spools

mode = sys.argv[1]
world = spools.init()
me, p = world.rank, world.size

if mode.startswith("python"):
    layout = "f64[30,7] *,cyclic on 1x%d" % p
    with world.stream_listen("127.0.0.1:0", layout=layout) as r:
        assert r.layout == layout
        if me == 0:
            print("listening on %s" % r.address, flush=True)
        # A wrong buffer on one rank fails the receive on every rank (no hang); the ADU
        # stays the next one.
        try:
            r.recv(out=np.zeros(1) if me == p - 1 else np.zeros((30, len(range(me, 7, p)))))
        except ValueError as e:
            assert me == p - 1 and "shape" in str(e), e
        except spools.SpoolsError as e:
            assert me != p - 1, e
        else:
            raise AssertionError("a wrong buffer was taken")
        n = 0
        try:
            for a in r:
                want = (np.arange(210, dtype=np.float64) + 1000 * n).reshape(30, 7)[:, me::p]
                assert a.dtype == np.float64 and np.array_equal(a, want), (n, a)
                n += 1
            assert r.recv() is None and r.peek() is None
            print("received %d" % n)
        except spools.PeerGoneError as e:
            assert mode == "python-die", e
            print("sender gone after %d" % n)
else:
    spools_bin, files = sys.argv[2], sys.argv[3:]
    r = world.dup().stream_listen("tcp:127.0.0.1:0")  # on a communicator of its own
    sender = None
    if me == 0:
        sender = subprocess.Popen([spools_bin, "send", "--links", "3", "--tu", "999",
                                   *files, "tcp:" + r.address])
    for i, f in enumerate(files):
        data = np.fromfile(f, dtype=np.uint8)
        info = r.peek()
        assert info == {"stream": i + 1, "adu": 0, "size": data.size}, info
        b = -(-data.size // p)
        if i == 0:  # into a caller's array
            out = np.zeros(len(data[me * b:(me + 1) * b]), dtype=np.uint8)
            got = r.recv(out=out)
            assert got is out
        else:
            got = next(r)
        assert np.array_equal(got, data[me * b:(me + 1) * b]), (i, got[:8])
    assert r.recv() is None
    r.close()
    if sender is not None:
        assert sender.wait(timeout=60) == 0
    print("received %d files" % len(files))
