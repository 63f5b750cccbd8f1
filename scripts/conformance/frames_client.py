"""A third party's framebuffer client, written from docs/view.md (and the stream wire format
of docs/streams.md) alone: frame headers, the colour maps and what the viewer's page is sent,
a minimal stream sender (one link) and a minimal WebSocket client. Standard library only,
plus the `crc32c` module for the stream's checksums."""

import base64
import hashlib
import json
import math
import os
import re
import select
import socket
import struct
import time

# --- The framebuffer protocol (docs/view.md, "The framebuffer protocol") ---------------

HEADER_LEN = 128
FRAME_VERSION = 1
FORMATS = {1: "grey", 2: "rgb", 3: "f32", 4: "f64"}
FORMAT_CODE = {v: k for k, v in FORMATS.items()}
BYTES_PER_PIXEL = {"grey": 1, "rgb": 3, "f32": 4, "f64": 8}
COLORMAPS = {0: "none", 1: "grey", 2: "inferno", 3: "viridis"}
COLORMAP_CODE = {v: k for k, v in COLORMAPS.items()}
# The page's message names the format as these.
FORMAT_NAME = {"grey": "Grey8", "rgb": "Rgb8", "f32": "F32", "f64": "F64"}

# The stop tables, as docs/view.md gives them.
STOPS = {
    "grey": [(0, 0, 0), (255, 255, 255)],
    "inferno": [
        (0, 0, 4), (40, 11, 84), (101, 21, 110), (159, 42, 99),
        (212, 72, 66), (245, 125, 21), (250, 193, 39), (252, 255, 164),
    ],
    "viridis": [
        (68, 1, 84), (70, 50, 127), (54, 92, 141), (39, 127, 142),
        (31, 161, 135), (74, 194, 109), (159, 218, 58), (253, 231, 37),
    ],
}
HEADER = struct.Struct("<4sHBBIIQQIHHddQ64s")
assert HEADER.size == HEADER_LEN


def round_half_away(x):
    """Rounds to the nearest integer, halves away from zero (as the doc says)."""
    a = abs(x)
    r = math.floor(a)
    if a - r >= 0.5:
        r += 1
    return int(r) if x >= 0 else -int(r)


def encode_header(fmt, width, height, frame=0, time_us=0, group=0, members=0,
                  colormap="none", lo=0.0, hi=0.0, title=""):
    t = title.encode()
    assert len(t) <= 64
    return HEADER.pack(b"SPFB", FRAME_VERSION, FORMAT_CODE[fmt], COLORMAP_CODE[colormap],
                       width, height, frame, time_us, group, members, len(t), lo, hi, 0,
                       t.ljust(64, b"\0"))


def decode_frame(adu):
    """A whole frame: (header as a dict, pixel bytes); raises ValueError when it is none."""
    if len(adu) < HEADER_LEN:
        raise ValueError("truncated header")
    (magic, version, fmt, cmap, w, h, frame, time_us, group, members, title_len, lo, hi,
     _reserved, title) = HEADER.unpack_from(adu)
    if magic != b"SPFB" or version != FRAME_VERSION:
        raise ValueError("not a frame")
    if fmt not in FORMATS or cmap not in COLORMAPS or title_len > 64:
        raise ValueError("bad field")
    hdr = dict(format=FORMATS[fmt], colormap=COLORMAPS[cmap], width=w, height=h,
               frame=frame, time_us=time_us, group=group, members=members,
               title=title[:title_len].decode(), lo=lo, hi=hi)
    px = adu[HEADER_LEN:]
    if len(px) != w * h * BYTES_PER_PIXEL[hdr["format"]]:
        raise ValueError("pixel bytes do not match the size")
    return hdr, px


def colour_at(cmap, t):
    """The colour at t of a map: the stops evenly spaced, linearly interpolated."""
    stops = STOPS[cmap]
    n = len(stops)
    t = 0.0 if math.isnan(t) else min(max(t, 0.0), 1.0)
    x = t * (n - 1)
    i = min(int(math.floor(x)), n - 2)
    f = x - i
    a, b = stops[i], stops[i + 1]
    return tuple(round_half_away(a[c] + (b[c] - a[c]) * f) for c in range(3))


def palette(cmap):
    return [colour_at(cmap, i / 255.0) for i in range(256)]


def level(v, lo, hi):
    """The palette entry of value v: round((v - lo) * (255 / (hi - lo))), clamped; NaN 0."""
    k = 255.0 / (hi - lo)
    x = round_half_away((v - lo) * k) if not math.isnan(v) and not math.isinf(v) else None
    if x is None:
        return 255 if v == math.inf else 0
    return max(0, min(255, x))


def expected_pixels(hdr, px, scale=1, channels=4):
    """What the viewer sends for a frame, as the doc says: every scale-th pixel of every
    scale-th row, as RGB(A) with alpha 255. Returns (iw, ih, bytes)."""
    w, h, fmt = hdr["width"], hdr["height"], hdr["format"]
    bpp = BYTES_PER_PIXEL[fmt]
    iw, ih = -(-w // scale), -(-h // scale)
    pal = palette(hdr["colormap"]) if fmt in ("f32", "f64") else None
    out = bytearray()
    for oy in range(ih):
        for ox in range(iw):
            o = ((oy * scale) * w + ox * scale) * bpp
            p = px[o:o + bpp]
            if fmt == "grey":
                rgb = (p[0], p[0], p[0])
            elif fmt == "rgb":
                rgb = (p[0], p[1], p[2])
            else:
                v = struct.unpack("<f" if fmt == "f32" else "<d", p)[0]
                rgb = pal[level(v, hdr["lo"], hdr["hi"])]
            out += bytes(rgb)
            if channels == 4:
                out.append(255)
    return iw, ih, bytes(out)


def decode_message(msg):
    """A binary message of the page's WebSocket: (JSON description, {panel id: blob})."""
    (n,) = struct.unpack_from("<I", msg)
    desc = json.loads(msg[4:4 + n].decode("utf-8"))
    base = 4 + n
    blobs = {}
    end = base
    for p in desc["panels"]:
        f = p.get("frame")
        if f:
            blobs[p["id"]] = msg[base + f["off"]:base + f["off"] + f["len"]]
            end = max(end, base + f["off"] + f["len"])
    if end != len(msg):
        raise ValueError(f"message of {len(msg)} bytes, frames end at {end}")
    return desc, blobs


def hex_block(doc, marker):
    """The bytes of the fenced block that follows `marker` in a document (hex digits,
    whitespace ignored)."""
    i = doc.index(marker)
    m = re.compile(r"```text\n(.*?)```", re.S).search(doc, i)
    return bytes.fromhex("".join(m.group(1).split()))


# --- A stream sender, one link (docs/streams.md, "The wire format") ---------------------

class FrameSender:
    """One connection of one link, one stream, one ADU per frame."""

    def __init__(self, addr, stream=1, timeout=30.0):
        import crc32c  # installed by scripts/test-conformance.sh

        self._crc = crc32c.crc32c
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.stream = stream
        self.opened = False
        self.adus = 0
        self.conn = int.from_bytes(os.urandom(8), "little")
        self.sock.sendall(b"SPSH" + struct.pack("<HHHHQ", 1, 0, 1, 0, self.conn))
        welcome = self._read(12)
        if welcome[:4] != b"SPSW":
            raise ValueError(f"no welcome: {welcome!r}")
        (self.version, self.flags) = struct.unpack_from("<HH", welcome, 4)

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            got = self.sock.recv(n - len(buf))
            if not got:
                raise ConnectionError("receiver closed the link")
            buf += got
        return buf

    def send(self, adu):
        """Sends one ADU (every ADU of the stream has the first one's size)."""
        size = len(adu)
        if not self.opened:
            # group 0, after u32::MAX (none), flags 0, one TU holding the whole ADU.
            self.sock.sendall(b"SPSO" + struct.pack("<IIIIQQ", self.stream, 0, 0xFFFFFFFF,
                                                    0, size, size))
            self.opened = True
        su = b"SPSD" + struct.pack("<IHHQQQQII", self.stream, 0, 0, self.adus, 0, 0, size,
                                   size, self._crc(adu))
        self.sock.sendall(su + adu)
        self.adus += 1

    def close(self):
        """Closes the stream, then reads (acks) until the receiver closes the link."""
        self.sock.sendall(b"SPSC" + struct.pack("<IIQ", self.stream, 0, self.adus))
        self.sock.shutdown(socket.SHUT_WR)
        while self.sock.recv(4096):
            pass
        self.sock.close()


# --- A WebSocket client (RFC 6455), as the page's ---------------------------------------

class WebSocket:
    def __init__(self, host, port, path="/frames", timeout=30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        hostport = f"{host}:{port}"
        req = (f"GET {path} HTTP/1.1\r\nHost: {hostport}\r\nOrigin: http://{hostport}\r\n"
               f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            got = self.sock.recv(4096)
            if not got:
                raise ConnectionError(f"closed during the handshake: {self.buf!r}")
            self.buf += got
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        if not lines[0].startswith("HTTP/1.1 101"):
            raise ConnectionError(f"no upgrade: {lines[0]}")
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        headers = {k.strip().lower(): v.strip()
                   for k, v in (ln.split(":", 1) for ln in lines[1:])}
        if headers.get("sec-websocket-accept") != accept:
            raise ConnectionError("bad Sec-WebSocket-Accept")

    def _read(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no WebSocket message in time")
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                continue
            got = self.sock.recv(1 << 20)
            if not got:
                raise ConnectionError("the viewer closed the WebSocket")
            self.buf += got
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def pending(self, wait):
        """Whether bytes of a message arrive within `wait` seconds."""
        if self.buf:
            return True
        r, _, _ = select.select([self.sock], [], [], wait)
        return bool(r)

    def recv(self, timeout=30.0):
        """The next data message: (opcode 1 text / 2 binary, payload)."""
        deadline = time.monotonic() + timeout
        op, data = None, b""
        while True:
            b0, b1 = self._read(2, deadline)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack(">H", self._read(2, deadline))
            elif n == 127:
                (n,) = struct.unpack(">Q", self._read(8, deadline))
            mask = self._read(4, deadline) if b1 & 0x80 else None
            payload = self._read(n, deadline)
            if mask:
                payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
            code = b0 & 0x0F
            if code == 8:
                raise ConnectionError("the viewer closed the WebSocket")
            if code == 9:
                self._send(10, payload)
                continue
            if code == 10:
                continue
            if code != 0:
                op = code
            data += payload
            if b0 & 0x80:
                return op, data

    def _send(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = bytes([0x80 | opcode, 0x80 | n])
        elif n < 65536:
            head = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack(">H", n)
        else:
            head = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload)))

    def send_text(self, text):
        self._send(1, text.encode())

    def close(self):
        try:
            self._send(8, struct.pack(">H", 1000))
        except OSError:
            pass
        self.sock.close()
