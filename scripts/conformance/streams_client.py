"""A client of the Spools stream protocol, written from docs/streams.md ("The wire format")
alone: the frames, the secret handshake (BLAKE3, implemented here from its specification),
a sender of K links and a receiver of one logical connection. Standard library plus the
`crc32c` module.

Nothing here is fast; it is meant to be obviously what the document says.
"""

import ipaddress
import socket
import struct
import threading

import crc32c as _crc32c

# --------------------------------------------------------------------------------------
# BLAKE3 (hash, keyed_hash, derive_key), after the BLAKE3 specification.

_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
       0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
_PERM = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT = 1, 2, 4, 8
_KEYED_HASH, _DERIVE_KEY_CONTEXT, _DERIVE_KEY_MATERIAL = 16, 32, 64
_BLOCK, _CHUNK = 64, 1024
_M = 0xFFFFFFFF


def _rotr(x, n):
    return ((x >> n) | (x << (32 - n))) & _M


def _g(s, a, b, c, d, mx, my):
    s[a] = (s[a] + s[b] + mx) & _M
    s[d] = _rotr(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & _M
    s[b] = _rotr(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b] + my) & _M
    s[d] = _rotr(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & _M
    s[b] = _rotr(s[b] ^ s[c], 7)


def _compress(cv, words, counter, block_len, flags):
    s = list(cv) + list(_IV[:4]) + [counter & _M, (counter >> 32) & _M, block_len, flags]
    m = list(words)
    for r in range(7):
        _g(s, 0, 4, 8, 12, m[0], m[1])
        _g(s, 1, 5, 9, 13, m[2], m[3])
        _g(s, 2, 6, 10, 14, m[4], m[5])
        _g(s, 3, 7, 11, 15, m[6], m[7])
        _g(s, 0, 5, 10, 15, m[8], m[9])
        _g(s, 1, 6, 11, 12, m[10], m[11])
        _g(s, 2, 7, 8, 13, m[12], m[13])
        _g(s, 3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[i] for i in _PERM]
    for i in range(8):
        s[i] ^= s[i + 8]
        s[i + 8] ^= cv[i]
    return s


def _words(block):
    return list(struct.unpack("<16I", block.ljust(_BLOCK, b"\0")))


class _Output:
    def __init__(self, cv, words, counter, block_len, flags):
        self.cv, self.words, self.counter = cv, words, counter
        self.block_len, self.flags = block_len, flags

    def chaining_value(self):
        return _compress(self.cv, self.words, self.counter, self.block_len, self.flags)[:8]

    def root_bytes(self, n=32):
        out = b""
        counter = 0
        while len(out) < n:
            w = _compress(self.cv, self.words, counter, self.block_len, self.flags | _ROOT)
            out += struct.pack("<16I", *w)
            counter += 1
        return out[:n]


class _Chunk:
    def __init__(self, key, counter, flags):
        self.cv, self.counter, self.flags = list(key), counter, flags
        self.block, self.compressed, self.length = b"", 0, 0

    def _start(self):
        return _CHUNK_START if self.compressed == 0 else 0

    def update(self, data):
        while data:
            if len(self.block) == _BLOCK:
                self.cv = _compress(self.cv, _words(self.block), self.counter, _BLOCK,
                                    self.flags | self._start())[:8]
                self.compressed += 1
                self.block = b""
            take = min(_BLOCK - len(self.block), len(data))
            self.block += data[:take]
            self.length += take
            data = data[take:]

    def output(self):
        return _Output(self.cv, _words(self.block), self.counter, len(self.block),
                       self.flags | self._start() | _CHUNK_END)


class _Blake3:
    def __init__(self, key=_IV, flags=0):
        self.key, self.flags = list(key), flags
        self.chunk = _Chunk(self.key, 0, flags)
        self.stack = []

    def update(self, data):
        data = bytes(data)
        while data:
            if self.chunk.length == _CHUNK:
                cv = self.chunk.output().chaining_value()
                total = self.chunk.counter + 1
                while total & 1 == 0:
                    cv = _Output(self.key, self.stack.pop() + cv, 0, _BLOCK,
                                 _PARENT | self.flags).chaining_value()
                    total >>= 1
                self.stack.append(cv)
                self.chunk = _Chunk(self.key, self.chunk.counter + 1, self.flags)
            take = min(_CHUNK - self.chunk.length, len(data))
            self.chunk.update(data[:take])
            data = data[take:]
        return self

    def digest(self, n=32):
        out = self.chunk.output()
        for left in reversed(self.stack):
            out = _Output(self.key, left + out.chaining_value(), 0, _BLOCK,
                          _PARENT | self.flags)
        return out.root_bytes(n)


def blake3(data):
    return _Blake3().update(data).digest()


def blake3_keyed(key, data):
    assert len(key) == 32
    return _Blake3(struct.unpack("<8I", key), _KEYED_HASH).update(data).digest()


def blake3_derive_key(context, material):
    ctx = _Blake3(_IV, _DERIVE_KEY_CONTEXT).update(context.encode()).digest()
    return _Blake3(struct.unpack("<8I", ctx), _DERIVE_KEY_MATERIAL).update(material).digest()


# --------------------------------------------------------------------------------------
# The secret handshake.

KEY_CONTEXT = "spools 2026 job secret proof key"
PURPOSE_DATA = 2


class ProtocolError(Exception):
    """Bytes that are not what the protocol says."""


class BadProof(ProtocolError):
    """The peer could not prove it knows the secret."""


class Refused(Exception):
    """The receiver ended the link instead of going on."""


def secret_from_hex(text):
    text = text.strip()
    if len(text) != 32:
        raise ValueError("a secret is 32 hexadecimal digits")
    return bytes.fromhex(text)


def proof_key(secret):
    return blake3_derive_key(KEY_CONTEXT, secret)


def proof_input(role, client_nonce, server_nonce, context):
    return role + client_nonce + server_nonce + struct.pack("<Q", len(context)) + context


def proof(secret, role, client_nonce, server_nonce, context):
    """role: b"server" or b"client"."""
    return blake3_keyed(proof_key(secret),
                        proof_input(role, client_nonce, server_nonce, context))


def identity(rank, lane, priority=0):
    return struct.pack("<IHBB", rank, lane, priority, 0)


def client_hello(nonce):
    return b"SPLS" + struct.pack("<HBB", 1, PURPOSE_DATA, 0) + nonce


def parse_client_hello(b):
    if len(b) != 24 or b[:4] != b"SPLS":
        raise ProtocolError("not a handshake hello")
    version, purpose, reserved = struct.unpack("<HBB", b[4:8])
    if version != 1 or reserved != 0:
        raise ProtocolError("handshake hello: version %d reserved %d" % (version, reserved))
    return purpose, b[8:24]


def server_hello(secret, client_nonce, server_nonce, purpose=PURPOSE_DATA):
    p = proof(secret, b"server", client_nonce, server_nonce, bytes([purpose]))
    return b"SPLS" + struct.pack("<HH", 1, 0) + server_nonce + p


def client_auth(secret, client_nonce, reply, ident, purpose=PURPOSE_DATA):
    """Checks the receiver's reply (56 bytes) and returns the sender's proof message (40
    bytes); BadProof when the receiver does not know `secret`."""
    if len(reply) != 56 or reply[:4] != b"SPLS":
        raise ProtocolError("not a handshake reply")
    version, reserved = struct.unpack("<HH", reply[4:8])
    if version != 1 or reserved != 0:
        raise ProtocolError("handshake reply: version %d reserved %d" % (version, reserved))
    server_nonce, their = reply[8:24], reply[24:56]
    if their != proof(secret, b"server", client_nonce, server_nonce, bytes([purpose])):
        raise BadProof("the receiver does not know this secret")
    return ident + proof(secret, b"client", client_nonce, server_nonce,
                         bytes([purpose]) + ident)


def check_client_auth(secret, client_nonce, server_nonce, auth, purpose=PURPOSE_DATA):
    if len(auth) != 40:
        raise ProtocolError("handshake auth of %d bytes" % len(auth))
    ident, their = auth[:8], auth[8:]
    if their != proof(secret, b"client", client_nonce, server_nonce,
                      bytes([purpose]) + ident):
        raise BadProof("the sender does not know this secret")
    return struct.unpack("<IHBB", ident)


# --------------------------------------------------------------------------------------
# Frames.

VERSION = 1
NOT_SEQUENCED = 0xFFFFFFFF
VARIABLE = 0xFFFFFFFFFFFFFFFF
HELLO_CAN_PROVE, HELLO_CAN_MOVE = 1, 2
WELCOME_REQUIRE_PROOF, WELCOME_ACKS, WELCOME_PROVEN, WELCOME_MOVE = 1, 2, 4, 8
SU_HEADER = 52
MAX_SU = 64 << 20
MAX_LINKS = 1024

_FIXED = {b"H": 20, b"W": 12, b"O": 36, b"D": 52, b"C": 20, b"A": 20, b"M": 24}


class Hello:
    def __init__(self, version, flags, links, link, conn):
        self.version, self.flags, self.links, self.link, self.conn = \
            version, flags, links, link, conn


class Welcome:
    def __init__(self, version, flags):
        self.version, self.flags = version, flags


class Open:
    def __init__(self, stream, group, after, flags, tu, adu):
        self.stream, self.group, self.after, self.flags, self.tu, self.adu = \
            stream, group, after, flags, tu, adu


class Su:
    def __init__(self, stream, su, link, adu, tu, offset, size, crc, payload):
        self.stream, self.su, self.link, self.adu, self.tu = stream, su, link, adu, tu
        self.offset, self.size, self.crc, self.payload = offset, size, crc, payload


class Close:
    def __init__(self, stream, adus):
        self.stream, self.adus = stream, adus


class Ack:
    def __init__(self, stream, adu):
        self.stream, self.adu = stream, adu


class Move:
    """Where a moved link says hello again: `host` as text (IPv4 dotted, or IPv6)."""

    def __init__(self, host, port):
        self.host, self.port = host, port


def _eq(a, b):
    return type(a) is type(b) and vars(a) == vars(b)


for _c in (Hello, Welcome, Open, Su, Close, Ack, Move):
    _c.__eq__ = _eq
    _c.__repr__ = lambda self: "%s(%s)" % (type(self).__name__, ", ".join(
        "%s=%r" % kv for kv in vars(self).items()))


def encode(f):
    if isinstance(f, Hello):
        return b"SPSH" + struct.pack("<HHHHQ", f.version, f.flags, f.links, f.link, f.conn)
    if isinstance(f, Welcome):
        return b"SPSW" + struct.pack("<HHI", f.version, f.flags, 0)
    if isinstance(f, Open):
        return b"SPSO" + struct.pack("<IIIIQQ", f.stream, f.group, f.after, f.flags, f.tu,
                                     f.adu)
    if isinstance(f, Su):
        return b"SPSD" + struct.pack("<IHHQQQQII", f.stream, f.su, f.link, f.adu, f.tu,
                                     f.offset, f.size, len(f.payload), f.crc) + f.payload
    if isinstance(f, Close):
        return b"SPSC" + struct.pack("<IIQ", f.stream, 0, f.adus)
    if isinstance(f, Ack):
        return b"SPSA" + struct.pack("<IIQ", f.stream, 0, f.adu)
    if isinstance(f, Move):
        ip = ipaddress.ip_address(f.host)
        if ip.version == 4:
            ip = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + ip.packed)
        return b"SPSM" + struct.pack("<HH", f.port, 0) + ip.packed
    raise TypeError(f)


def frame_len(head):
    """Bytes of the frame whose first 4 bytes (or, for an SU, 52) are `head`, or None
    when more of the header is needed."""
    if head[:3] != b"SPS" or head[3:4] not in _FIXED:
        raise ProtocolError("not a stream frame: %r" % bytes(head[:4]))
    fixed = _FIXED[head[3:4]]
    if head[3:4] != b"D":
        return fixed
    if len(head) < SU_HEADER:
        return None
    (length,) = struct.unpack("<I", head[44:48])
    return SU_HEADER + length


def decode(buf):
    """The frame at the start of `buf` and the bytes it used, or None when incomplete."""
    if len(buf) < 4:
        if not b"SPS".startswith(bytes(buf[:3])):
            raise ProtocolError("bad magic")
        return None
    n = frame_len(buf[:SU_HEADER])
    if n is None or len(buf) < n:
        return None
    kind, b = buf[3:4], bytes(buf[4:n])
    if kind == b"H":
        f = Hello(*struct.unpack("<HHHHQ", b))
        if not 1 <= f.links <= MAX_LINKS or f.link >= f.links:
            raise ProtocolError("hello: link %d of %d" % (f.link, f.links))
    elif kind == b"W":
        version, flags, reserved = struct.unpack("<HHI", b)
        if reserved:
            raise ProtocolError("welcome: reserved %d" % reserved)
        f = Welcome(version, flags)
    elif kind == b"O":
        f = Open(*struct.unpack("<IIIIQQ", b))
        if f.tu == 0 or f.flags != 0:
            raise ProtocolError("open: tu %d flags %d" % (f.tu, f.flags))
    elif kind == b"D":
        stream, su, link, adu, tu, off, size, length, crc = struct.unpack("<IHHQQQQII",
                                                                          b[:48])
        if length > MAX_SU or off + length > size or su >= MAX_LINKS or link >= MAX_LINKS:
            raise ProtocolError("su: offset %d len %d size %d" % (off, length, size))
        f = Su(stream, su, link, adu, tu, off, size, crc, b[48:])
    elif kind == b"M":
        port, reserved = struct.unpack("<HH", b[:4])
        if reserved or port == 0:
            raise ProtocolError("move: port %d reserved %d" % (port, reserved))
        ip = ipaddress.IPv6Address(b[4:20])
        f = Move(str(ip.ipv4_mapped or ip), port)
    else:
        stream, reserved, n64 = struct.unpack("<IIQ", b)
        if reserved:
            raise ProtocolError("reserved %d" % reserved)
        f = Close(stream, n64) if kind == b"C" else Ack(stream, n64)
    return f, n


def su_range(size, tu, links, t, s):
    """(offset in the ADU, length) of SU s of TU t, or None when that SU is empty."""
    start = t * tu
    if start >= size:
        return None
    this_tu = min(tu, size - start)
    su = -(-tu // links)
    frm = su * s
    if frm >= this_tu:
        return None
    return start + frm, min(su, this_tu - frm)


def adu_sus(stream, adu, data, open_, links):
    """The SUs of one ADU, per link: the list of SU frames each link carries, in order."""
    size = len(data)
    out = [[] for _ in range(links)]
    if size == 0:
        out[0].append(Su(stream, 0, 0, adu, 0, 0, 0, _crc32c.crc32c(b""), b""))
        return out
    tu = size if open_.adu == VARIABLE else open_.tu
    for t in range(-(-size // tu)):
        for s in range(links):
            r = su_range(size, tu, links, t, s)
            if r is None:
                continue
            p = bytes(data[r[0]:r[0] + r[1]])
            out[s].append(Su(stream, s, s, adu, t, r[0], size, _crc32c.crc32c(p), p))
    return out


# --------------------------------------------------------------------------------------
# Sockets.

def recv_exact(sock, n):
    """n bytes, or fewer at the end of the connection."""
    b = bytearray()
    while len(b) < n:
        got = sock.recv(n - len(b))
        if not got:
            break
        b += got
    return bytes(b)


def read_frame(sock):
    """The next frame, or None at the end of the connection between frames."""
    head = recv_exact(sock, 4)
    if not head:
        return None
    if len(head) < 4:
        raise ProtocolError("the link ended in the middle of a frame")
    need = _FIXED.get(head[3:4])
    if head[:3] != b"SPS" or need is None:
        raise ProtocolError("not a stream frame: %r" % head)
    body = head + recv_exact(sock, need - 4)
    if len(body) < need:
        raise ProtocolError("the link ended in the middle of a frame")
    n = frame_len(body)
    if n > len(body):
        body += recv_exact(sock, n - len(body))
        if len(body) < n:
            raise ProtocolError("the link ended in the middle of an SU")
    f, _ = decode(body)
    return f


class Sender:
    """K links to a receiver, written from the caller's thread."""

    def __init__(self, addr, links, secret=None, conn=0x5eed, window=0, timeout=60.0):
        self.links, self.window, self.acks = [], window, False
        self.acked = [{} for _ in range(links)]
        try:
            self._connect(addr, links, secret, conn, timeout)
        except BaseException:
            # A refused sender hangs up at once, so the receiver can name it.
            for s in self.links:
                s.close()
            raise
        self.opened = {}

    def _connect(self, addr, links, secret, conn, timeout):
        for l in range(links):
            s = socket.create_connection(addr, timeout=timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.links.append(s)
            flags = HELLO_CAN_PROVE if secret is not None else 0
            s.sendall(encode(Hello(VERSION, flags, links, l, conn)))
            w = read_frame(s)
            if not isinstance(w, Welcome) or w.version != VERSION:
                raise ProtocolError("link %d: no welcome: %r" % (l, w))
            if w.flags & WELCOME_REQUIRE_PROOF:
                if secret is None:
                    raise Refused("link %d: the receiver requires the secret's proof" % l)
                nonce = bytes((0x11 * (l + 1) + i) & 0xFF for i in range(16))
                s.sendall(client_hello(nonce))
                reply = recv_exact(s, 56)
                s.sendall(client_auth(secret, nonce, reply, identity(0, l)))
                w = read_frame(s)
                if not isinstance(w, Welcome) or not w.flags & WELCOME_PROVEN:
                    raise Refused("link %d: the proof was refused: %r" % (l, w))
            self.acks = bool(w.flags & WELCOME_ACKS)

    def _note_ack(self, l, f):
        if not isinstance(f, Ack):
            raise ProtocolError("link %d: the receiver sent %r" % (l, f))
        d = self.acked[l]
        d[f.stream] = max(d.get(f.stream, -1), f.adu)

    def open(self, stream, tu, adu, group=0, after=NOT_SEQUENCED):
        o = Open(stream, group, after, 0, tu, adu)
        self.opened[stream] = o
        for s in self.links:
            s.sendall(encode(o))

    def send_adu(self, stream, n, data):
        o = self.opened[stream]
        for l, sus in enumerate(adu_sus(stream, n, data, o, len(self.links))):
            if sus and self.window and self.acks and n >= self.window:
                # Hold the first SU of ADU n until ADU n - window was acknowledged.
                while self.acked[l].get(stream, -1) < n - self.window:
                    f = read_frame(self.links[l])
                    if f is None:
                        raise Refused("link %d closed while waiting for acks" % l)
                    self._note_ack(l, f)
            for su in sus:
                self.links[l].sendall(encode(su))

    def close(self, stream, adus):
        for s in self.links:
            s.sendall(encode(Close(stream, adus)))

    def finish(self):
        """Shuts every link's sending side, then reads every link (concurrently) until the
        receiver closes it. Returns the acks seen, per link."""
        for s in self.links:
            s.shutdown(socket.SHUT_WR)
        errors = []

        def drain(l, s):
            try:
                while True:
                    f = read_frame(s)
                    if f is None:
                        return
                    self._note_ack(l, f)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        ts = [threading.Thread(target=drain, args=(l, s)) for l, s in enumerate(self.links)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for s in self.links:
            s.close()
        if errors:
            raise errors[0]
        return self.acked


class _Stream:
    def __init__(self, o):
        self.open, self.next, self.partial, self.closed, self.sent = o, 0, {}, set(), None
        self.ended = False


class Reassembly:
    """One logical connection's streams (sans-IO): feed each link's frames, take ADUs."""

    def __init__(self, links):
        self.links, self.streams, self.events = links, {}, []

    def on_frame(self, link, f):
        if isinstance(f, Open):
            st = self.streams.get(f.stream)
            if st is None:
                self.streams[f.stream] = _Stream(f)
            elif st.open != f:
                raise ProtocolError("stream %d opened again differently" % f.stream)
        elif isinstance(f, Su):
            self._su(link, f)
        elif isinstance(f, Close):
            st = self.streams.get(f.stream)
            if st is None or link in st.closed:
                raise ProtocolError("close of stream %d" % f.stream)
            if st.sent is not None and st.sent != f.adus:
                raise ProtocolError("links disagree on the ADUs of stream %d" % f.stream)
            st.sent = f.adus
            st.closed.add(link)
        else:
            raise ProtocolError("link %d: unexpected %r" % (link, f))
        self._release()

    def _su(self, link, f):
        st = self.streams.get(f.stream)
        if st is None or link in st.closed or st.ended:
            raise ProtocolError("SU of stream %d not open on link %d" % (f.stream, link))
        if f.su != link or f.link != link:
            raise ProtocolError("SU %d/link %d on link %d" % (f.su, f.link, link))
        if st.open.adu != VARIABLE and f.size != st.open.adu:
            raise ProtocolError("ADU size %d in a stream of %d" % (f.size, st.open.adu))
        if f.adu < st.next:
            raise ProtocolError("SU of an ADU handed out")
        if f.size == 0:
            ok = (f.tu, f.su, f.offset, len(f.payload)) == (0, 0, 0, 0)
        else:
            tu = f.size if st.open.adu == VARIABLE else st.open.tu
            ok = su_range(f.size, tu, self.links, f.tu, f.su) == (f.offset, len(f.payload))
        if not ok:
            raise ProtocolError("SU out of place: %r" % f)
        if _crc32c.crc32c(f.payload) != f.crc:
            raise ProtocolError("CRC32C mismatch: %r" % f)
        p = st.partial.setdefault(f.adu, [bytearray(f.size), set(), 0, f.size])
        if p[3] != f.size or (f.tu, f.su) in p[1]:
            raise ProtocolError("SU twice or of another size")
        p[0][f.offset:f.offset + len(f.payload)] = f.payload
        p[1].add((f.tu, f.su))
        p[2] += len(f.payload)

    def _release(self):
        moved = True
        while moved:
            moved = False
            for sid, st in sorted(self.streams.items()):
                if st.ended:
                    continue
                after = st.open.after
                if after != NOT_SEQUENCED and not (after in self.streams
                                                   and self.streams[after].ended):
                    continue
                p = st.partial.get(st.next)
                if p is not None and p[1] and p[2] == p[3]:
                    self.events.append(("adu", sid, st.next, bytes(p[0])))
                    del st.partial[st.next]
                    st.next += 1
                    moved = True
                elif len(st.closed) == self.links and st.sent == st.next:
                    st.ended = True
                    self.events.append(("ended", sid, st.next))
                    moved = True


class Receiver:
    """Serves one logical connection on a port of its own (the OS picks it).

    close_late: close the links only once every link of the connection ended (allowed by
    the closing rule; a sender must not hang on it). Otherwise each link is closed as soon
    as it ended."""

    def __init__(self, secret=None, close_late=False, timeout=60.0):
        self.secret, self.close_late, self.timeout = secret, close_late, timeout
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.settimeout(timeout)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Condition()
        self.events, self.errors, self.hellos, self.refused = [], [], {}, []
        self.ended_links = 0
        self.socks = {}
        self.reassembly = None

    def _ack_all(self, stream, adu):
        b = encode(Ack(stream, adu))
        for s in list(self.socks.values()):
            try:
                s.sendall(b)
            except OSError:
                pass

    def _link(self, sock):
        sock.settimeout(self.timeout)
        link = None
        try:
            h = read_frame(sock)
            if not isinstance(h, Hello) or h.version != VERSION:
                raise ProtocolError("no hello first: %r" % h)
            flags = WELCOME_ACKS | (WELCOME_REQUIRE_PROOF if self.secret else 0)
            sock.sendall(encode(Welcome(VERSION, flags)))
            if self.secret is not None:
                purpose, cnonce = parse_client_hello(recv_exact(sock, 24))
                if purpose != PURPOSE_DATA:
                    raise ProtocolError("handshake purpose %d" % purpose)
                snonce = bytes((0xA0 + i + h.link) & 0xFF for i in range(16))
                sock.sendall(server_hello(self.secret, cnonce, snonce))
                check_client_auth(self.secret, cnonce, snonce, recv_exact(sock, 40))
                sock.sendall(encode(Welcome(VERSION, WELCOME_ACKS | WELCOME_PROVEN)))
            link = h.link
            with self.lock:
                if self.reassembly is None:
                    self.reassembly = Reassembly(h.links)
                if h.link in self.hellos or h.links != self.reassembly.links:
                    raise ProtocolError("hello %r does not fit" % h)
                self.hellos[h.link] = h
                self.socks[h.link] = sock
                self.lock.notify_all()
            while True:
                f = read_frame(sock)
                if f is None:
                    break
                with self.lock:
                    self.reassembly.on_frame(link, f)
                    new = self.reassembly.events[len(self.events):]
                    self.events.extend(new)
                    for e in new:
                        if e[0] == "adu":
                            self._ack_all(e[1], e[2])
        except (ProtocolError, OSError) as e:
            with self.lock:
                (self.errors if link is not None else self.refused).append(e)
        finally:
            with self.lock:
                if link is not None:
                    self.ended_links += 1
                    self.lock.notify_all()
                    if self.close_late:
                        # The closing rule allows waiting for every link's end.
                        self.lock.wait_for(
                            lambda: self.ended_links == self.reassembly.links,
                            timeout=self.timeout)
                    self.socks.pop(link, None)
                else:
                    self.lock.notify_all()
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def serve(self):
        """Serves until every link of the connection ended; returns the events:
        ("adu", stream, n, bytes) and ("ended", stream, adus), in hand-out order."""
        threads = []
        try:
            while True:
                with self.lock:
                    r = self.reassembly
                    if r is not None and len(threads) - len(self.refused) >= r.links:
                        break
                sock, _ = self.listener.accept()
                t = threading.Thread(target=self._link, args=(sock,), daemon=True)
                t.start()
                threads.append(t)
                with self.lock:
                    # Wait for this link's hello (or its refusal) before counting it.
                    self.lock.wait_for(
                        lambda: len(self.hellos) + len(self.refused) >= len(threads),
                        timeout=self.timeout)
        finally:
            self.listener.close()
        for t in threads:
            t.join(self.timeout)
            if t.is_alive():
                raise TimeoutError("a link did not end")
        if self.errors:
            raise self.errors[0]
        return self.events

    def serve_in_thread(self):
        """Runs serve() on a thread; returns a function that waits for its result."""
        out = {}

        def run():
            try:
                out["events"] = self.serve()
            except Exception as e:  # noqa: BLE001 - handed to the caller
                out["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()

        def result(timeout):
            t.join(timeout)
            if t.is_alive():
                raise TimeoutError("the receiver did not finish in %s s" % timeout)
            if "error" in out:
                raise out["error"]
            return out["events"]

        return result


# --------------------------------------------------------------------------------------
# The document's test vectors.

def vector_blocks(text):
    """The fenced blocks of docs/streams.md whose info string is `vector NAME`: a dict
    NAME -> [(label, bytes)]. A line is a label then hex digits (spaces ignored); a line
    starting with white space continues the message above."""
    blocks, lines, i = {}, text.splitlines(), 0
    while i < len(lines):
        if not lines[i].startswith("```vector "):
            i += 1
            continue
        name, msgs = lines[i][len("```vector "):].strip(), []
        i += 1
        while not lines[i].startswith("```"):
            line = lines[i]
            if line[:1].isspace():
                msgs[-1] = (msgs[-1][0], msgs[-1][1] + bytes.fromhex("".join(line.split())))
            else:
                label, _, rest = line.partition(" ")
                msgs.append((label, bytes.fromhex("".join(rest.split()))))
            i += 1
        blocks[name] = msgs
        i += 1
    return blocks
