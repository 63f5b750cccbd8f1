"""Arguments refused on one rank only (issue 58): a `layout` that does not parse or is
not a layout, a `format` that does not parse, a `style` that is not a FrameStyle, a group
item that is not a tuple of the right form. The rank declines its part of the collective
call instead of returning alone, so that every rank raises: that rank its own error, the
others the same class naming it; nothing waits for it, and the next calls meet as usual.
argv: MODE ...

- "io DIR": write_file, read_file, redistribute, pipe_writer, pipe_reader (PIPE_DIR is
  SPOOLS_PIPE_DIR: the openings fail before any meeting).
- "send DEST DEST2": StreamConnection.send / send_frame / send_group / send_frames into
  `spools recv` at DEST, StreamWriter.send_frame into another at DEST2; only good calls
  send, so DEST gets exactly stream 1's ADUs 0-2 (grey frames 0, 1, 2), streams 2 and 3
  (frames of group 1) ADUs 0-1, streams 4 and 5 (plain ADUs of group 2) and 6 (plain)
  ADU 0 (grey(0)), and DEST2 stream 1's ADUs 0-1 (grey frames 0 and 1).
- "recv SPOOLS FILE": StreamReader.recv with a bad layout on the last rank: refused on
  every rank, and the ADU (FILE, sent by `spools send`) stays the next one.

Every rank prints "declined ok" at the end."""
import os
import subprocess
import sys

import numpy as np

import spools

mode = sys.argv[1]
world = spools.init()
P, me = world.size, world.rank
LAST = P - 1


def refused(call, bad_rank, cls, needle):
    """`call` fails on every rank with `cls`: on `bad_rank` with `needle` in the message,
    on the others naming `bad_rank`."""
    try:
        call()
    except cls as e:
        if me == bad_rank:
            assert needle in str(e), (needle, str(e))
        else:
            assert "rank %d" % bad_rank in str(e) or "ranks %d" % bad_rank in str(e), str(e)
        return
    raise AssertionError("not refused on rank %d: %s" % (me, needle))


def only(rank, bad, good):
    return bad if me == rank else good


if mode == "io":
    d = sys.argv[2]
    spec = "f64[29,13] block,* on %dx1" % P
    rows = -(-29 // P)
    mine = (np.arange(29 * 13, dtype=np.float64).reshape(29, 13)[me * rows:(me + 1) * rows]).copy()
    path = os.path.join(d, "a.npy")
    world.write_file(path, mine, spec)
    typo = "f64[29,13] blok,* on %dx1" % P
    # A layout that does not parse on the last rank, one that is no layout on rank 0.
    refused(lambda: world.write_file(path, mine, only(LAST, typo, spec)), LAST,
            spools.LayoutError, "blok")
    refused(lambda: world.write_file(path, mine, only(0, 42, spec)), 0, TypeError, "int")
    # A format that does not parse on the last rank (the others write .npy).
    refused(lambda: world.write_file(path, mine, spec, format=only(LAST, "zip", "npy")), LAST,
            ValueError, "zip")
    refused(lambda: world.read_file(path, only(LAST, typo, spec)), LAST, spools.LayoutError,
            "blok")
    # redistribute: a bad layout on one rank, and layouts of another dataset on one rank
    # only (its plan fails there alone).
    cols = "f64[29,13] *,block on 1x%d" % P
    refused(lambda: world.redistribute(mine, spec, only(0, typo, cols)), 0, spools.LayoutError,
            "blok")
    refused(lambda: world.redistribute(mine, spec, only(LAST, "f64[29,14] *,block on 1x%d" % P,
                                                       cols)),
            LAST, spools.LayoutError, "cannot plan")
    # Pipes: a bad layout on the last rank fails the opening on every rank, before the
    # meeting (no consumer is started: a rank that met alone would wait for one).
    refused(lambda: world.pipe_writer("pipe:declined", only(LAST, typo, spec)), LAST,
            spools.LayoutError, "blok")
    refused(lambda: world.pipe_reader("pipe:declined", only(LAST, 42, spec)), LAST,
            (TypeError, spools.LayoutError), "int")
    # The job's collectives still meet: the file is the first one written.
    back = world.redistribute(world.read_file(path, spec), spec, cols)
    want = np.arange(29 * 13, dtype=np.float64).reshape(29, 13)[:, me * -(-13 // P):(me + 1) * -(-13 // P)]
    assert np.array_equal(back, want), back
elif mode == "send":
    dest, dest2 = sys.argv[2], sys.argv[3]
    H, W = 12, 20
    b = -(-H // P)
    GREY = "u8[%d,%d] block,* on %dx1" % (H, W, P)
    TYPO = "u8[%d,%d] blok,* on %dx1" % (H, W, P)

    def grey(k):
        return np.ascontiguousarray(((np.arange(H * W) + 7 * k) % 256).astype(np.uint8)
                                    .reshape(H, W)[me * b:(me + 1) * b])

    with world.stream_connect(dest, links=2) as c:
        g = c.open_stream(tu=1024)  # frames
        r = c.open_stream(tu=1024, group=1)  # frames of group 1
        f = c.open_stream(tu=1024, group=1)
        q = c.open_stream(tu=1024, group=2)  # plain ADUs of group 2
        u = c.open_stream(tu=1024, group=2)
        raw = c.open_stream(tu=1024)  # plain ADUs
        c.send_frame(g, grey(0), GREY)
        refused(lambda: c.send_frame(g, grey(1), GREY, only(0, 42, None)), 0, TypeError,
                "FrameStyle")
        refused(lambda: c.send_frame(g, grey(1), only(LAST, 7, GREY)), LAST, TypeError, "int")
        c.send_frame(g, grey(1), GREY)
        refused(lambda: c.send(raw, grey(0), only(LAST, TYPO, GREY)), LAST, spools.LayoutError,
                "blok")
        c.send(raw, grey(0), GREY)
        # Group sends: an item of the wrong form, a bad layout or style in an item.
        refused(lambda: c.send_group(2, [(q, grey(0), GREY), only(LAST, (u, grey(0)),
                                                                   (u, grey(0), GREY))]),
                LAST, TypeError, "tuple")
        refused(lambda: c.send_group(2, [(q, grey(0), GREY), (u, grey(0), only(0, TYPO, GREY))]),
                0, spools.LayoutError, "blok")
        c.send_group(2, [(q, grey(0), GREY), (u, grey(0), GREY)])
        refused(lambda: c.send_frames(1, [(r, grey(0), GREY, only(LAST, "x", None)),
                                          (f, grey(0), GREY)]),
                LAST, TypeError, "FrameStyle")
        refused(lambda: c.send_frames(1, [(r, grey(0), GREY), (f, grey(0), only(LAST, 5, GREY))]),
                LAST, TypeError, "int")
        c.send_frames(1, [(r, grey(0), GREY), (f, grey(0), GREY)])
        c.send_frames(1, [(r, grey(1), GREY), (f, grey(1), GREY)])
        c.send_frame(g, grey(2), GREY)
        sent = [c.adus(s) for s in (g, r, f, q, u, raw)]
        assert sent == [3, 2, 2, 1, 1, 1], sent
    with world.stream_open(dest2, links=2, tu=1024) as s:
        s.send_frame(grey(0), GREY)
        refused(lambda: s.send_frame(grey(1), GREY, only(LAST, 3.5, None)), LAST, TypeError,
                "FrameStyle")
        refused(lambda: s.send_frame(grey(1), only(0, TYPO, GREY)), 0, spools.LayoutError, "blok")
        s.send_frame(grey(1), GREY)
        assert s.adus == 2
elif mode == "recv":
    spools_bin, f = sys.argv[2], sys.argv[3]
    data = np.fromfile(f, dtype=np.uint8)
    r = world.stream_listen("tcp:127.0.0.1:0")
    sender = None
    if me == 0:
        sender = subprocess.Popen([spools_bin, "send", f, "tcp:" + r.address])
    spec = "u8[%d] block on %d" % (data.size, P)
    refused(lambda: r.recv(only(LAST, "u8[%d] blok on %d" % (data.size, P), spec)), LAST,
            spools.LayoutError, "blok")
    refused(lambda: r.recv(only(0, 1.5, spec)), 0, TypeError, "float")
    # The ADU stayed the next one.
    got = r.recv(spec)
    n = -(-data.size // P)
    assert np.array_equal(got, data[me * n:(me + 1) * n]), got[:8]
    assert r.recv() is None
    r.close()
    if sender is not None:
        assert sender.wait(timeout=60) == 0
else:
    raise SystemExit("unknown mode " + mode)
print("declined ok")
world.finalize()
