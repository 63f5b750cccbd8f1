"""A job receiving a stream. argv: MODE ...
- "python": ADUs of stream_send.py, received with the columns cyclic, checked against
  numpy (ADU 0 into an order=F layout: F-contiguous arrays), then every call raises
  FinalizedError after finalize; "python-die": the sender goes away after 1 ADU.
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
        # A wrong buffer on one rank fails the receive on every rank (no hang), with that
        # rank's class and message; the ADU stays the next one.
        try:
            r.recv(out=np.zeros(1) if me == p - 1 else np.zeros((30, len(range(me, 7, p)))))
        except ValueError as e:  # that rank's class and message on every rank
            assert "shape" in str(e), e
            assert me == p - 1 or "rank %d" % (p - 1) in str(e), e
        else:
            raise AssertionError("a wrong buffer was taken")
        fcols = layout + " order=F"
        try:  # a C-contiguous out of more than one column: not the layout's order
            r.recv(fcols, out=np.zeros((30, len(range(me, 7, p)))) if me == p - 1
                   else np.asfortranarray(np.zeros((30, len(range(me, 7, p))))))
        except ValueError as e:  # that rank's class and message on every rank
            assert "F-contiguous" in str(e), e
            assert me == p - 1 or "rank %d" % (p - 1) in str(e), e
        else:
            raise AssertionError("a C-contiguous out was taken for an order=F layout")
        n = 0
        try:
            a = r.recv(fcols)
            # An ADU's bytes are its dataset in the layout's order: ADU 0 was sent from a
            # C layout, read here as column-major.
            want = np.arange(210, dtype=np.float64).reshape((30, 7), order="F")[:, me::p]
            assert a.flags.f_contiguous and np.array_equal(a, want), a
            n = 1
            for a in r:
                want = (np.arange(210, dtype=np.float64) + 1000 * n).reshape(30, 7)
                if n == 1:  # sent from an order=F layout: its bytes are column-major
                    want = want.ravel(order="F").reshape(30, 7)
                want = want[:, me::p]
                assert a.dtype == np.float64 and np.array_equal(a, want), (n, a)
                n += 1
            assert r.recv() is None and r.peek() is None
            print("received %d" % n)
        except spools.PeerGoneError as e:
            assert mode == "python-die", e
            print("sender gone after %d" % n)
    if mode == "python":
        world.finalize()
        calls = [r.recv, r.peek, r.skip, r.close, lambda: next(r),
                 lambda: world.stream_listen("127.0.0.1:0")]
        for i, call in enumerate(calls):
            try:
                call()
            except spools.FinalizedError:
                pass
            else:
                raise AssertionError("call %d after finalize: no FinalizedError" % i)
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
