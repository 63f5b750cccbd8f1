"""A job streaming frames (the framebuffer protocol) to DEST: argv DEST MODE.

- "connection": one connection of 2 links with four streams: 1, grey u8[12,20] (rows in
  blocks); 2 and 3, lock-step group 1: RGB u8[12,20,3] (rows cyclic) and an f32[12,20]
  field (columns cyclic, viridis from 0 to 10); 4, plain ADUs sequenced after stream 1; 5,
  an ADU of varying size (send_var).
  Frames 0-2 of every stream, then frame 3 of streams 2 and 3 one by one (a second frame
  of stream 2 first runs ahead of its group: refused). After frame 0: a frame layout that
  is not 2-D, a group send missing a member, a bad style and a wrong share on the last
  rank, each refused on every rank with nothing sent.
- "writer": a single stream (stream_open) of 2 grey frames with send_frame (and a wrong
  share on the last rank, then a layout that is not 2-D: refused, nothing sent).
- "view N": N frames of 64x96 of the grey stream ("py grey") and of the group ("py rgb",
  "py field") into `spools view` (the browser test, crates/spools-view/tests/py).

Pixel n of each frame is what frames.py computes; the test reads the frames back from
`spools recv --out DIR` and checks headers and pixels."""
import sys

import numpy as np

import spools

H, W = 12, 20


def grey(n, h=H, w=W):
    return ((np.arange(h * w) + 7 * n) % 256).astype(np.uint8).reshape(h, w)


def rgb(n, h=H, w=W):
    return ((np.arange(h * w * 3) * 5 + 11 * n) % 256).astype(np.uint8).reshape(h, w, 3)


def field(n, h=H, w=W):
    i, j = np.mgrid[0:h, 0:w]
    return (n + 0.5 * i + 0.25 * j).astype(np.float32)


if __name__ == "__main__":
    dest, mode = sys.argv[1], sys.argv[2]
    if mode == "view":
        H, W = 64, 96
    world = spools.init()
    me, p = world.rank, world.size
    b = -(-H // p)
    GREY = "u8[%d,%d] block,* on %dx1" % (H, W, p)
    RGB = spools.Layout("u8[%d,%d,3] cyclic,*,* on %dx1x1" % (H, W, p))
    FIELD = "f32[%d,%d] *,cyclic on 1x%d" % (H, W, p)

    def grey_share(n):
        return np.ascontiguousarray(grey(n, H, W)[me * b:(me + 1) * b])

    def rgb_share(n):
        return np.ascontiguousarray(rgb(n, H, W)[me::p])

    def field_share(n):
        return np.ascontiguousarray(field(n, H, W)[:, me::p])

    def refused(call, local, remote, needle):
        """`call` fails on every rank: with `local` (and `needle` in its message) where
        the fault is, `remote` on the others (None: every rank has the fault)."""
        try:
            call()
        except local as e:
            assert needle in str(e), (needle, str(e))
            return
        except Exception as e:  # noqa: BLE001
            assert remote is not None and isinstance(e, remote), repr(e)
            return
        raise AssertionError("not refused: " + needle)

    if mode == "writer":
        with world.stream_open(dest, links=2, tu=1024) as s:
            for n in range(2):
                s.send_frame(grey_share(n), GREY, spools.FrameStyle(title="writer"))
                if n == 0:
                    # A wrong share on the last rank: refused everywhere, nothing sent.
                    refused(lambda: s.send_frame(np.zeros(3, np.uint8) if me == p - 1
                                                 else grey_share(1), GREY),
                            ValueError if me == p - 1 else (), spools.SpoolsError, "shape")
                    # Not 2-D.
                    refused(lambda: s.send_frame(grey_share(1).ravel(), "u8[%d] block on %d"
                                                 % (H * W, p)), ValueError, None, "a frame is")
            assert s.adus == 2
        print("sent 2 frames")
        sys.exit(0)

    if mode == "view":
        fstyle = spools.FrameStyle("py field", colormap="viridis", lo=0.0, hi=10.0)
        with world.stream_connect(dest, links=2) as c:
            g, r, f = c.open_stream(tu=4096), c.open_stream(tu=4096, group=1), \
                c.open_stream(tu=4096, group=1)
            for n in range(int(sys.argv[3])):
                c.send_frame(g, grey_share(n), GREY, spools.FrameStyle("py grey"))
                c.send_frames(1, [(r, rgb_share(n), RGB, spools.FrameStyle("py rgb")),
                                  (f, field_share(n), FIELD, fstyle)])
        print("sent frames")
        sys.exit(0)

    gstyle = spools.FrameStyle(title="grey")
    rstyle = spools.FrameStyle("rgb")
    fstyle = spools.FrameStyle("field", colormap="viridis", lo=0.0, hi=10.0)
    assert (fstyle.title, fstyle.colormap, fstyle.lo, fstyle.hi) == ("field", "viridis", 0, 10)
    with world.stream_connect(dest, links=2) as c:
        assert c.links == 2 and c.dest == dest.replace("tcp:", "")
        g = c.open_stream(tu=1024)
        r = c.open_stream(tu=1024, group=1)
        f = c.open_stream(tu=1024, group=1, priority=1, window=3)
        raw = c.open_stream(tu=64, after=g)
        assert (g, r, f, raw) == (1, 2, 3, 4)
        for n in range(3):
            c.send_frame(g, grey_share(n), GREY, gstyle)
            c.send_frames(1, [(r, rgb_share(n), RGB, rstyle), (f, field_share(n), FIELD, fstyle)])
            if n == 0:
                # Not 2-D: refused on every rank (the header is the Rust code's check).
                refused(lambda: c.send_frame(g, grey_share(0).ravel(), "u8[%d] block on %d"
                                             % (H * W, p), gstyle), ValueError, None,
                        "a frame is")
                # A group send that misses one of the group's open streams.
                refused(lambda: c.send_frames(1, [(r, rgb_share(1), RGB, rstyle)]),
                        spools.InvalidArgumentError, None, "missing")
                refused(lambda: c.send_group(1, [(r, rgb_share(1), RGB)]),
                        spools.InvalidArgumentError, None, "missing")
                # A field with lo >= hi.
                refused(lambda: c.send_frame(f, field_share(1), FIELD,
                                             spools.FrameStyle(lo=1.0, hi=1.0)),
                        ValueError, None, "not a frame")
                # A wrong share on the last rank only: every rank fails, nothing is sent.
                refused(lambda: c.send_frame(g, np.zeros(3, np.uint8) if me == p - 1
                                             else grey_share(1), GREY, gstyle),
                        ValueError if me == p - 1 else (), spools.SpoolsError, "shape")
                refused(lambda: c.send_frames(1, [(r, rgb_share(1), RGB, rstyle),
                                                  (f, np.zeros(3, np.float32) if me == p - 1
                                                   else field_share(1), FIELD, fstyle)]),
                        ValueError if me == p - 1 else (), spools.SpoolsError, "shape")
                # Not a style.
                refused(lambda: c.send_frame(g, grey_share(1), GREY, {"title": "x"}),
                        TypeError, None, "FrameStyle")
                # A stream that is not open.
                refused(lambda: c.send_frame(9, grey_share(1), GREY, gstyle),
                        spools.InvalidArgumentError, None, "no stream 9")
        # Lock step: frame 3 of stream 2 alone, then a second one runs ahead of stream 3.
        c.send_frame(r, rgb_share(3), RGB, rstyle)
        refused(lambda: c.send_frame(r, rgb_share(4), RGB, rstyle),
                spools.InvalidArgumentError, None, "lock-step")
        c.send_frame(f, field_share(3), FIELD, fstyle)
        assert [c.adus(s) for s in (g, r, f, raw)] == [3, 4, 4, 0]
        # Plain ADUs on the same connection.
        c.send(raw, np.full(len(range(me, 40, p)), me, np.uint8), "u8[40] cyclic on %d" % p)
        # An ADU of varying size: rank r gives r + 1 bytes of value r (one gives none).
        v = c.open_stream(tu=64, variable=True)
        refused(lambda: c.send_var(v, [1, 2]), TypeError, None, "buffer")
        c.send_var(v, np.full(me + 1, me, np.uint8))
        refused(lambda: c.send_var(raw, b"x"), ValueError, None, "variable")
        c.close_stream(g)
        assert c.adus(g) == 0 and c.adus(v) == 1
    print("sent frames")
    world.finalize()
