"""The stream protocol's conformance tests: the Python client of streams_client.py (written
from docs/streams.md alone) against the real `spools send`, `spools recv` and a job's
streams, and against the document's own test vectors."""

import os
import queue
import random
import re
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import streams_client as sc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "streams.md")
# Generous for a loaded 2-core machine; only a hang reaches it.
TIMEOUT = 120
SECRET_HEX = "00112233445566778899aabbccddeeff"
OTHER_HEX = "ffeeddccbbaa99887766554433221100"


def data(seed, n):
    return random.Random(seed).randbytes(n)


@pytest.fixture
def secret_file(tmp_path):
    p = tmp_path / "job.key"
    p.write_text(SECRET_HEX + "\n")
    return str(p)


def run(args, timeout=TIMEOUT):
    return subprocess.run(args, capture_output=True, timeout=timeout)


class Recv:
    """A `spools recv` process: its port, from the line it prints on stderr."""

    def __init__(self, spools_bin, procs, args):
        self.p = subprocess.Popen([spools_bin, "recv", "tcp:127.0.0.1:0", *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(self.p)
        self.lines = queue.Queue()
        self.err = []

        def pump():
            for line in self.p.stderr:
                line = line.decode(errors="replace")
                self.err.append(line)
                self.lines.put(line)

        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        line = self.lines.get(timeout=TIMEOUT)
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        assert m, line
        self.port = int(m.group(1))

    def wait(self):
        """Its exit status and everything it printed on stderr."""
        code = self.p.wait(timeout=TIMEOUT)
        self.pump.join(TIMEOUT)
        return code, "".join(self.err)


# --------------------------------------------------------------------------------------
# 1. The Python client as the receiver of `spools send`.

@pytest.mark.parametrize("links,close_late", [(1, True), (2, True), (3, True), (2, False)])
def test_spools_send_into_the_python_receiver(spools_bin, secret_file, tmp_path, links,
                                              close_late):
    a, b = data(1, 100_003), data(2, 5_000)
    (tmp_path / "a").write_bytes(a)
    (tmp_path / "b").write_bytes(b)
    r = sc.Receiver(secret=sc.secret_from_hex(SECRET_HEX), close_late=close_late)
    result = r.serve_in_thread()
    p = run([spools_bin, "send", str(tmp_path / "a"), str(tmp_path / "b"),
             "tcp:127.0.0.1:%d" % r.port, "--links", str(links), "--tu", "10000",
             "--secret", secret_file])
    assert p.returncode == 0, p.stderr.decode()
    events = result(TIMEOUT)
    # Streams numbered from 1, the second sequenced after the first: handed out in order.
    assert events == [("adu", 1, 0, a), ("ended", 1, 1), ("adu", 2, 0, b), ("ended", 2, 1)]


def test_spools_send_with_a_window_waits_on_the_python_receivers_acks(spools_bin, tmp_path):
    a = data(3, 50_000)
    (tmp_path / "a").write_bytes(a)
    r = sc.Receiver(close_late=True)
    result = r.serve_in_thread()
    p = run([spools_bin, "send", str(tmp_path / "a"), "tcp:127.0.0.1:%d" % r.port,
             "--links", "3", "--adu", "7000", "--window", "1"])
    assert p.returncode == 0, p.stderr.decode()
    events = result(TIMEOUT)
    chunks = [a[i:i + 7000] for i in range(0, len(a), 7000)]
    assert events == [("adu", 1, n, c) for n, c in enumerate(chunks)] + [
        ("ended", 1, len(chunks))]


def test_spools_send_without_the_secret_is_refused_by_the_python_receiver(spools_bin,
                                                                          tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 10)
    other = tmp_path / "other.key"
    other.write_text(OTHER_HEX)
    r = sc.Receiver(secret=sc.secret_from_hex(SECRET_HEX))
    r.serve_in_thread()
    try:
        p = run([spools_bin, "send", str(tmp_path / "a"), "tcp:127.0.0.1:%d" % r.port,
                 "--secret", str(other)])
        assert p.returncode != 0
        assert "could not prove it knows this job's secret" in p.stderr.decode()
        # `spools send` hung up once the receiver had closed the link, refusing it.
        with r.lock:
            assert r.refused and not r.hellos
    finally:
        r.listener.close()


# --------------------------------------------------------------------------------------
# 2. The Python client as a sender into `spools recv`.

def send_two_streams(port, links, secret=None, window=1):
    """Stream 1: one ADU of 100003 bytes in TUs of 10000; stream 2 (variable, after 1):
    ADUs of 3, 0, 65536 and 1 bytes. The bytes `spools recv` should write, in order."""
    a = data(4, 100_003)
    var = [b"xyz", b"", data(5, 65_536), b"!"]
    s = sc.Sender(("127.0.0.1", port), links, secret=secret, window=window,
                  conn=random.getrandbits(64))
    s.open(1, 10_000, len(a))
    s.send_adu(1, 0, a)
    s.close(1, 1)
    s.open(2, 8, sc.VARIABLE, after=1)
    for n, d in enumerate(var):
        s.send_adu(2, n, d)
    s.close(2, len(var))
    acks = s.finish()
    return a + b"".join(var), 1 + len(var), acks, s.acks


@pytest.mark.parametrize("links,with_secret", [(1, False), (3, False), (2, True), (3, True)])
def test_the_python_sender_into_spools_recv(spools_bin, procs, secret_file, tmp_path, links,
                                            with_secret):
    out = tmp_path / "out.bin"
    args = ["--out", str(out)] + (["--secret", secret_file] if with_secret else [])
    recv = Recv(spools_bin, procs, args)
    secret = sc.secret_from_hex(SECRET_HEX) if with_secret else None
    want, adus, acks, announced = send_two_streams(recv.port, links, secret)
    code, err = recv.wait()
    assert code == 0, err
    assert out.read_bytes() == want
    assert "%d ADUs, %d bytes" % (adus, len(want)) in err
    # The welcome announced acks, and the window of 1 waited for them: ADU 2 of stream 2
    # (on every link) for ADU 1's ack, ADU 3 (on link 0 only) for ADU 2's.
    assert announced
    assert all(a.get(2, -1) >= 1 for a in acks)
    assert acks[0].get(2, -1) >= 2


def test_spools_recv_refuses_a_wrong_secret_and_serves_the_right_one(spools_bin, procs,
                                                                      secret_file, tmp_path):
    out = tmp_path / "out.bin"
    recv = Recv(spools_bin, procs, ["--out", str(out), "--secret", secret_file])
    with pytest.raises(sc.BadProof):
        sc.Sender(("127.0.0.1", recv.port), 2, secret=sc.secret_from_hex(OTHER_HEX))
    with pytest.raises(sc.Refused):
        sc.Sender(("127.0.0.1", recv.port), 2, secret=None)
    want, _, _, _ = send_two_streams(recv.port, 2, sc.secret_from_hex(SECRET_HEX))
    code, err = recv.wait()
    assert code == 0, err
    assert out.read_bytes() == want
    assert "refused a client" in err


def test_spools_recv_takes_stream_0(spools_bin, procs, tmp_path):
    out = tmp_path / "adus"
    out.mkdir()
    recv = Recv(spools_bin, procs, ["--out", str(out)])
    s = sc.Sender(("127.0.0.1", recv.port), 2, conn=random.getrandbits(64))
    s.open(0, 4, 9)
    s.send_adu(0, 0, b"012345678")
    s.send_adu(0, 1, b"876543210")
    s.close(0, 2)
    s.finish()
    code, err = recv.wait()
    assert code == 0, err
    assert sorted(os.listdir(out)) == ["s0-a0", "s0-a1"]
    assert (out / "s0-a0").read_bytes() == b"012345678"
    assert (out / "s0-a1").read_bytes() == b"876543210"


# --------------------------------------------------------------------------------------
# 3. A job's stream, received by the Python client.

def npy_data(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY"
    n = int.from_bytes(b[8:10], "little")
    assert b"'<f8'" in b[10:10 + n]
    return b[10 + n:]


@pytest.mark.parametrize("links", [1, 2])
def test_a_jobs_stream_into_the_python_receiver(spools_bin, tmp_path, links):
    r = sc.Receiver(close_late=True)
    result = r.serve_in_thread()
    d = tmp_path / "heat"
    p = run([spools_bin, "demo", "heat", "--n", "200", "--steps", "4", "--every", "2",
             "--ranks", "4", "--readers", "2", "--dir", str(d),
             "--stream", "tcp:127.0.0.1:%d" % r.port, "--links", str(links)])
    assert p.returncode == 0, p.stderr.decode() + p.stdout.decode()
    events = result(TIMEOUT)
    snaps = [npy_data(d / "heat-00002.npy"), npy_data(d / "heat-00004.npy")]
    assert snaps[0] != snaps[1]
    # Each snapshot is one ADU of stream 1, the grid's bytes in the .npy data's order.
    assert events == [("adu", 1, 0, snaps[0]), ("adu", 1, 1, snaps[1]), ("ended", 1, 2)]


# --------------------------------------------------------------------------------------
# 4. The document's test vectors, decoded by the Python client.

def test_the_docs_vectors_decode():
    text = open(DOC).read()
    blocks = sc.vector_blocks(text)
    assert sorted(blocks) == ["link 0: receiver to sender", "link 0: sender to receiver",
                              "link 1: receiver to sender", "link 1: sender to receiver",
                              "moved link 1: rank 0 to sender", "moved link 1: rank 1 to sender",
                              "moved link 1: sender to rank 0", "moved link 1: sender to rank 1"]
    secret = sc.secret_from_hex("000102030405060708090a0b0c0d0e0f")
    assert sc._crc32c.crc32c(b"123456789") == 0xE3069283

    # The derivation block: the key and proof inputs of link 0 follow from the secret and
    # the nonces, and the proofs from them are the vectors'.
    deriv = dict(vector_like(text, "derivation link 0"))
    key = sc.proof_key(secret)
    assert deriv["key"] == key
    s2r, r2s = dict(blocks["link 0: sender to receiver"]), dict(
        blocks["link 0: receiver to sender"])
    cn, sn = s2r["client-hello"][8:24], r2s["server-hello"][8:24]
    assert deriv["server-proof-input"] == sc.proof_input(b"server", cn, sn, b"\x02")
    assert deriv["client-proof-input"] == sc.proof_input(b"client", cn, sn,
                                                         b"\x02" + sc.identity(0, 0))
    assert sc.blake3_keyed(key, deriv["server-proof-input"]) == r2s["server-hello"][24:]
    assert sc.blake3_keyed(key, deriv["client-proof-input"]) == s2r["client-auth"][8:]

    frames = []
    for link in (0, 1):
        s2r = blocks["link %d: sender to receiver" % link]
        r2s = blocks["link %d: receiver to sender" % link]
        got = dict(s2r)
        got.update(dict(r2s))
        purpose, cn = sc.parse_client_hello(got["client-hello"])
        assert purpose == 2
        assert cn == bytes(range(0x20 + 16 * link, 0x30 + 16 * link))
        sn = got["server-hello"][8:24]
        assert sn == bytes(range(0x80 + 16 * link, 0x90 + 16 * link))
        # The receiver's proof checks, and ours is the doc's; theirs, with another
        # secret, does not.
        auth = sc.client_auth(secret, cn, got["server-hello"], sc.identity(0, link))
        assert auth == got["client-auth"]
        assert sc.check_client_auth(secret, cn, sn, auth) == (0, link, 0, 0)
        with pytest.raises(sc.BadProof):
            sc.client_auth(sc.secret_from_hex(OTHER_HEX), cn, got["server-hello"],
                           sc.identity(0, link))
        assert sc.server_hello(secret, cn, sn) == got["server-hello"]
        # Every frame decodes whole and encodes back to the same bytes.
        decoded = []
        for label, b in s2r + r2s:
            if label in ("client-hello", "client-auth", "server-hello"):
                continue
            f, used = sc.decode(b)
            assert used == len(b), label
            assert sc.encode(f) == b, label
            assert type(f).__name__.lower() == label, label
            decoded.append(f)
        hello = decoded[0]
        assert (hello.links, hello.link, hello.conn, hello.flags) == (2, link, 0x0123456789ABCDEF,
                                                                       sc.HELLO_CAN_PROVE)
        welcomes = [f.flags for f in decoded if isinstance(f, sc.Welcome)]
        assert welcomes == [sc.WELCOME_REQUIRE_PROOF | sc.WELCOME_ACKS,
                            sc.WELCOME_PROVEN | sc.WELCOME_ACKS]
        acks = [(f.stream, f.adu) for f in decoded if isinstance(f, sc.Ack)]
        assert acks == [(1, 0), (2, 1)]
        frames += [(link, f) for f in decoded
                   if isinstance(f, (sc.Open, sc.Su, sc.Close))]
        # The SUs are where the striping puts them, with their CRCs.
        for f in decoded:
            if isinstance(f, sc.Su):
                assert f.crc == sc._crc32c.crc32c(f.payload)
    # Link 1's frames first: any interleaving gives the same ADUs.
    r = sc.Reassembly(2)
    for link, f in sorted(frames, key=lambda lf: -lf[0]):
        r.on_frame(link, f)
    assert r.events == [("adu", 1, 0, b"abcdefghij"), ("ended", 1, 1),
                        ("adu", 2, 0, b"xyz"), ("adu", 2, 1, b""), ("ended", 2, 2)]
    # And the striping rules alone give the same SUs.
    want = {0: [], 1: []}
    o1 = sc.Open(1, 0, sc.NOT_SEQUENCED, 0, 8, 10)
    o2 = sc.Open(2, 0, 1, 0, 8, sc.VARIABLE)
    for o, adus in ((o1, [b"abcdefghij"]), (o2, [b"xyz", b""])):
        for n, d in enumerate(adus):
            for link, sus in enumerate(sc.adu_sus(o.stream, n, d, o, 2)):
                want[link] += sus
    for link in (0, 1):
        assert [f for l, f in frames if l == link and isinstance(f, sc.Su)] == want[link]


def test_the_docs_moved_link_decodes():
    """The moved link of the document: a hello that can move, rank 0's welcome that moves
    it and the move frame (IPv4-mapped), the same hello to rank 1, its welcome with acks."""
    blocks = sc.vector_blocks(open(DOC).read())
    got = {}
    for name in ("sender to rank 0", "rank 0 to sender", "sender to rank 1",
                 "rank 1 to sender"):
        got[name] = []
        for label, b in blocks["moved link 1: " + name]:
            f, used = sc.decode(b)
            assert used == len(b) and sc.encode(f) == b, label
            assert type(f).__name__.lower() == label, label
            got[name].append(f)
    hello = sc.Hello(1, sc.HELLO_CAN_MOVE, 2, 1, 0x0123456789ABCDEF)
    assert got["sender to rank 0"] == [hello] and got["sender to rank 1"] == [hello]
    assert got["rank 0 to sender"] == [sc.Welcome(1, sc.WELCOME_MOVE),
                                       sc.Move("10.0.0.2", 7001)]
    assert got["rank 1 to sender"] == [sc.Welcome(1, sc.WELCOME_ACKS)]


def vector_like(text, name):
    """The messages of the fenced block whose info string is `name`."""
    blocks = sc.vector_blocks(text.replace("```" + name, "```vector " + name))
    return blocks[name]
