"""Conformance of `spools view`, from docs/view.md alone: frames sent over the stream
protocol by a client of our own, a page's WebSocket spoken by hand, and every image the
viewer sends checked byte for byte against the doc's rules (RGBA expansion, colour maps
through the documented stops, decimation), the ack rule, and the doc's test vectors."""

import math
import os
import re
import select
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

import frames_client as fc

DOC = (Path(__file__).resolve().parents[2] / "docs" / "view.md").read_text()
DEADLINE = 60.0  # seconds any one expected event may take on a busy machine


# --- The doc's test vectors --------------------------------------------------------------

def table(marker):
    i = DOC.index(marker)
    m = re.compile(r"```text\n(.*?)```", re.S).search(DOC, i)
    rows = [ln.split() for ln in m.group(1).strip().splitlines()[1:]]
    return [(r[0], int(r[1]), tuple(int(x) for x in r[2:5])) for r in rows]


def test_the_docs_stops_and_palette_entries():
    stops = {}
    for cmap, i, rgb in table("<!-- vector: stops -->"):
        assert len(stops.setdefault(cmap, [])) == i
        stops[cmap].append(rgb)
    assert stops == fc.STOPS
    for cmap, entry, rgb in table("<!-- vector: palette -->"):
        assert fc.palette(cmap)[entry] == rgb, (cmap, entry)


def test_the_docs_frame_and_message_decode():
    adu = fc.hex_block(DOC, "<!-- vector: frame -->")
    hdr, px = fc.decode_frame(adu)
    assert hdr == dict(format="f32", colormap="viridis", width=2, height=2, frame=7,
                       time_us=1_700_000_000_000_000, group=0, members=0, title="doc",
                       lo=0.0, hi=1.0)
    assert adu[4:6] == b"\x01\x00"
    values = struct.unpack("<4f", px)
    assert values[:2] == (0.25, 0.5) and math.isnan(values[2]) and values[3] == 2.0
    # Encoding the same header gives the same bytes.
    assert fc.encode_header("f32", 2, 2, frame=7, time_us=1_700_000_000_000_000,
                            colormap="viridis", lo=0.0, hi=1.0, title="doc") == adu[:128]
    assert [fc.level(v, 0.0, 1.0) for v in values] == [64, 128, 0, 255]

    msg = fc.hex_block(DOC, "<!-- vector: message -->")
    assert struct.unpack_from("<I", msg)[0] == 351 and len(msg) == 371
    desc, blobs = fc.decode_message(msg)
    assert desc["totals"] == {"connections": 1, "received": 1, "refused": 0}
    (panel,) = desc["panels"]
    assert (panel["id"], panel["conn"], panel["stream"], panel["state"]) == \
        (1, "0123456789abcdef", 1, "live")
    f = panel["frame"]
    assert (f["n"], f["format"], f["colormap"], f["encoding"], f["iw"], f["ih"]) == \
        (7, "F32", "viridis", "raw", 2, 2)
    iw, ih, rgba = fc.expected_pixels(hdr, px)
    assert (iw, ih) == (2, 2)
    assert blobs[1] == rgba
    assert rgba == bytes([58, 82, 138, 255, 35, 144, 138, 255, 68, 1, 84, 255,
                          253, 231, 37, 255])


# --- Against the real viewer -------------------------------------------------------------

def start_view(spools_bin, procs, *extra):
    p = subprocess.Popen([spools_bin, "view", "tcp:127.0.0.1:0", "--http", "127.0.0.1:0",
                          *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    procs.append(p)
    frames = url = None
    buf = b""
    end = time.monotonic() + DEADLINE
    while frames is None or url is None:
        left = end - time.monotonic()
        assert left > 0 and p.poll() is None, f"spools view did not start: {buf!r}"
        r, _, _ = select.select([p.stderr], [], [], left)
        if not r:
            continue
        got = os.read(p.stderr.fileno(), 4096)
        assert got, f"spools view exited: {buf!r}"
        buf += got
        m = re.search(rb"spools view: frames to tcp:([\d.]+):(\d+)\n", buf)
        if m:
            frames = (m.group(1).decode(), int(m.group(2)))
        m = re.search(rb"spools view: open http://([\d.]+):(\d+)/\n", buf)
        if m:
            url = (m.group(1).decode(), int(m.group(2)))
    return frames, url


class Page:
    """A page over the WebSocket, acknowledging as the doc says."""

    def __init__(self, http):
        self.ws = fc.WebSocket(*http)
        self.owed = False

    def next(self):
        """The next message (acknowledging the last one first)."""
        if self.owed:
            self.ws.send_text("ack")
        op, data = self.ws.recv(timeout=DEADLINE)
        assert op == 2, "the viewer sends binary messages only"
        self.owed = True
        return fc.decode_message(data)

    def until(self, want, what):
        """Messages until `want(desc, blobs)` is true; returns that message."""
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            desc, blobs = self.next()
            if want(desc, blobs):
                return desc, blobs
        pytest.fail(f"no message with {what} within {DEADLINE} s")


def grey_frame(n):
    w, h = 5, 3
    px = bytes((17 * i + 40 * n) % 256 for i in range(w * h))
    return fc.encode_header("grey", w, h, frame=n, title="grey") + px


def rgb_frame(n):
    w, h = 4, 2
    px = bytes((i * 29 + 3 * n) % 256 for i in range(w * h * 3))
    return fc.encode_header("rgb", w, h, frame=n, title="colour") + px


FIELD_VALUES = [-1.0, -2.5, 3.0, 9.0, float("nan"), float("inf"), float("-inf"), 0.0,
                1.0, 0.2, 0.0078125, 2.9921875, 1.5, 1.25, -0.99, 2.0, 0.5, 0.75,
                2.25, 2.5, 2.75, 0.1, 0.3, 1e30]


def field_frame(n):
    w, h = 6, 4
    px = struct.pack(f"<{w * h}f", *[v + n if math.isfinite(v) else v
                                     for v in FIELD_VALUES])
    return fc.encode_header("f32", w, h, frame=n, colormap="inferno", lo=-1.0, hi=3.0,
                            title="field") + px


def by_conn(desc, senders):
    """The panel of each sender (matched by its connection id), by sender name."""
    conns = {p["conn"]: p for p in desc["panels"]}
    return {name: conns.get(f"{s.conn:016x}") for name, s in senders.items()}


def check_image(panel, blobs, adu, scale=1):
    hdr, px = fc.decode_frame(adu)
    f = panel["frame"]
    assert f["n"] == hdr["frame"] and f["title"] == hdr["title"]
    assert (f["width"], f["height"]) == (hdr["width"], hdr["height"])
    assert f["format"] == fc.FORMAT_NAME[hdr["format"]]
    assert f["colormap"] == hdr["colormap"]
    assert (f["lo"], f["hi"]) == (hdr["lo"], hdr["hi"])
    iw, ih, rgba = fc.expected_pixels(hdr, px, scale)
    assert (f["iw"], f["ih"]) == (iw, ih)
    if f["encoding"] == "raw":
        assert f["len"] == iw * ih * 4
        assert blobs[panel["id"]] == rgba, f"{hdr['format']} pixels"
    else:
        jpeg = blobs[panel["id"]]
        assert f["encoding"] == "jpeg" and jpeg[:2] == b"\xff\xd8" and jpeg[-2:] == b"\xff\xd9"


def test_frames_reach_a_page_exactly_and_the_ack_paces_them(spools_bin, procs):
    frames, http = start_view(spools_bin, procs)
    makers = {"grey": grey_frame, "rgb": rgb_frame, "field": field_frame}
    senders = {name: fc.FrameSender(frames) for name in makers}
    for name, s in senders.items():
        s.send(makers[name](0))
    page = Page(http)

    # Every frame is sent once, with its image: the first message, or a later one (frames
    # may arrive after the page connects).
    shown = {}
    end = time.monotonic() + DEADLINE
    while len(shown) < 3:
        assert time.monotonic() < end, f"frames shown: {sorted(shown)}"
        desc, blobs = page.next()
        for name, p in by_conn(desc, senders).items():
            if p and p.get("frame"):
                assert name not in shown, "a frame the page has is not sent again"
                check_image(p, blobs, makers[name](0))
                shown[name] = p["frame"]["n"]
                assert p["state"] == "live"
    assert shown == {"grey": 0, "rgb": 0, "field": 0}

    # The ack rule: a new frame comes, but not before the page acknowledges.
    senders["grey"].send(grey_frame(1))
    assert not page.ws.pending(1.0), "a message came before the ack"
    desc, blobs = page.until(
        lambda d, b: (by_conn(d, senders)["grey"] or {}).get("frame"), "grey frame 1")
    p = by_conn(desc, senders)["grey"]
    assert p["frame"]["n"] == 1 and p["received"] == 2
    check_image(p, blobs, grey_frame(1))

    # `fit N`: every panel's newest frame again, decimated by ceil(width / N).
    page.ws.send_text("fit 2")
    desc, blobs = page.until(lambda d, b: all((p or {}).get("frame")
                                              for p in by_conn(d, senders).values()),
                             "every frame again after fit")
    ps = by_conn(desc, senders)
    for name, n in (("grey", 1), ("rgb", 0), ("field", 0)):
        w = fc.decode_frame(makers[name](n))[0]["width"]
        check_image(ps[name], blobs, makers[name](n), scale=max(1, -(-w // 2)))

    # `encoding jpeg`, then back to full size and raw.
    page.ws.send_text("fit 0")
    page.ws.send_text("encoding jpeg")
    desc, blobs = page.until(
        lambda d, b: all((p or {}).get("frame", {}).get("encoding") == "jpeg"
                         for p in by_conn(d, senders).values()), "JPEG frames")
    for name, p in by_conn(desc, senders).items():
        check_image(p, blobs, makers[name](1 if name == "grey" else 0))
    page.ws.send_text("encoding raw")
    senders["field"].send(field_frame(1))
    desc, blobs = page.until(
        lambda d, b: ((by_conn(d, senders)["field"] or {}).get("frame") or {}).get("n") == 1
        and by_conn(d, senders)["field"]["frame"]["encoding"] == "raw", "field frame 1, raw")
    check_image(by_conn(desc, senders)["field"], blobs, field_frame(1))

    # Closed streams say so.
    for s in senders.values():
        s.close()
    desc, _ = page.until(
        lambda d, b: all(p and p["state"] == "stream closed"
                         for p in by_conn(d, senders).values()), "streams closed")
    assert desc["totals"]["received"] >= 5
    page.ws.close()


def test_a_page_of_the_viewers_jpeg_choice_and_garbage(spools_bin, procs):
    frames, http = start_view(spools_bin, procs, "--encoding", "jpeg")
    s = fc.FrameSender(frames)
    s.send(rgb_frame(0))
    page = Page(http)
    desc, blobs = page.until(lambda d, b: any(p.get("frame") for p in d["panels"]),
                             "a frame")
    (p,) = [p for p in desc["panels"] if p.get("frame")]
    assert p["frame"]["encoding"] == "jpeg"
    check_image(p, blobs, rgb_frame(0))
    # An ADU that is no frame (the wrong magic) is named on its panel.
    bad = fc.FrameSender(frames)
    bad.send(b"SPFX" + rgb_frame(0)[4:])
    desc, _ = page.until(
        lambda d, b: any(q["conn"] == f"{bad.conn:016x}" and
                         q["state"].startswith("not a frame") for q in d["panels"]),
        "not a frame")
    assert desc["totals"]["refused"] == 1
    s.close()
    bad.close()
    page.ws.close()


def test_the_websocket_refuses_another_origin(spools_bin, procs):
    _, (host, port) = start_view(spools_bin, procs)
    with socket.create_connection((host, port), timeout=DEADLINE) as c:
        c.sendall(f"GET /frames HTTP/1.1\r\nHost: {host}:{port}\r\n"
                  "Origin: http://evil.example\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n".encode())
        head = c.recv(4096)
    assert head.startswith(b"HTTP/1.1 403")
