"""Ctrl-C in a rank waiting in a parallel pipe or a stream (pipes.rs, streams.rs; the
waits of spools_io's pipe/ and stream/): the wait ends with KeyboardInterrupt raised by
the call itself, the program catches it and goes on, the end it waited on is then
unusable (a second call raises, saying why, instead of waiting), and the job ends
cleanly (status 0, no traceback). Once these waits did not ask the interrupt check: the
signal's handler never ran, and the job waited on."""

import os
import signal
import socket
import subprocess
import sys
import threading
import uuid

import pytest

from conftest import PROGS, spools_bin, start_announcing


def interrupt_until_done(p, pids):
    """Sends SIGINT to every rank of `pids` (rank: pid) until the job `p` ends (the
    program ignores one landing outside the call: the event deciding the outcome is the
    call's wait seeing the signal); returns (out, err). Fails the test, killing the job,
    if it has not ended within 60 s."""
    for _ in range(120):  # within 60 s
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:  # it just ended
                pass
        try:
            return p.communicate(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    os.killpg(p.pid, signal.SIGKILL)
    out, err = p.communicate()
    pytest.fail("the job did not end after SIGINT\n--- stdout\n%s\n--- stderr\n%s" % (out, err))


def lines(out, rank):
    """Rank `rank`'s output lines (after its pid line, which `start_announcing` read)."""
    return [l.partition("] ")[2] for l in out.splitlines() if l.startswith("[%d] " % rank)]


def test_ctrl_c_in_a_pipe_read(tmp_path, monkeypatch):
    # The producer (2 ranks) opens the pipe and writes nothing until the test says so;
    # the consumer's ranks (2) each wait in read() for its first record.
    monkeypatch.setenv("SPOOLS_PIPE_DIR", str(tmp_path))
    monkeypatch.setenv("SPOOLS_PIPE_TIMEOUT", "60")
    name = "pipe:sigint-%s" % uuid.uuid4().hex[:12]
    release = tmp_path / "release"
    producer = subprocess.Popen(
        [spools_bin(), "run", "-n", "2", "--tag-output", "--", sys.executable,
         str(PROGS / "io_sigint.py"), "pipe-write", name, str(release)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        p, pids, _ = start_announcing(2, "io_sigint.py", "pipe-read", name)
        out, err = interrupt_until_done(p, pids)
        assert p.returncode == 0, (out, err)
        assert "Traceback" not in err, err
        for rank in range(2):
            assert lines(out, rank) == ["interrupted", "then: True"], out
        # The producer, released, finds the consumer gone, at its write or at its close
        # (a record may go into the socket's buffer before the consumer's end is seen),
        # and ends cleanly.
        release.write_text("go")
        pout, perr = producer.communicate(timeout=60)
    except BaseException:
        os.killpg(producer.pid, signal.SIGKILL)
        producer.communicate()
        raise
    assert producer.returncode == 0, (pout, perr)
    for rank in range(2):
        assert lines(pout, rank)[1:] in (["closed"], ["consumer gone: True"]), pout


@pytest.mark.parametrize("kind", ["pipe", "tcp"])
def test_ctrl_c_in_a_pipe_meeting(tmp_path, monkeypatch, kind):
    # A consumer whose producer never comes waits at the meeting (rank 0: in the pipe
    # directory, or at a TCP port), within SPOOLS_PIPE_TIMEOUT (here far longer than
    # the test): Ctrl-C ends it.
    monkeypatch.setenv("SPOOLS_PIPE_DIR", str(tmp_path))
    monkeypatch.setenv("SPOOLS_PIPE_TIMEOUT", "600")
    if kind == "pipe":
        name = "pipe:meet-%s" % uuid.uuid4().hex[:12]
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            name = "tcp:127.0.0.1:%d" % s.getsockname()[1]
    p, pids, _ = start_announcing(1, "io_sigint.py", "pipe-meet", name)
    out, err = interrupt_until_done(p, pids)
    assert p.returncode == 0, (out, err)
    assert "Traceback" not in err, err
    assert lines(out, 0) == ["interrupted"], out


@pytest.mark.parametrize("n", [1, 2])
def test_ctrl_c_in_a_stream_recv(n):
    # Rank 0 waits for the next ADU of a stream the job opened to itself and sends
    # nothing on; the other ranks wait for rank 0 to say what came. Rank 0 is
    # interrupted; it tells the others, whose recv() raises TransportError.
    p, pids, _ = start_announcing(n, "io_sigint.py", "stream-recv")
    out, err = interrupt_until_done(p, {0: pids[0]})
    assert p.returncode == 0, (out, err)
    assert "Traceback" not in err, err
    assert lines(out, 0) == ["interrupted", "then: True", "done"], out
    for rank in range(1, n):
        assert lines(out, rank) == ["rank 0 interrupted: True", "then: True", "done"], out


class StalledReceiver:
    """A stream receiver that welcomes one link (the hello's version, no flags) and then
    reads nothing: the link's sends fill the sockets' buffers and wait."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.listener.settimeout(60)
        self.address = "%s:%d" % self.listener.getsockname()
        self.conns = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            s, _ = self.listener.accept()
        except OSError:
            return
        self.conns.append(s)
        hello = b""
        while len(hello) < 20:  # hello := "SPSH" version flags links link conn (20 bytes)
            b = s.recv(20 - len(hello))
            if not b:
                return
            hello += b
        # welcome := "SPSW" version:u16 flags:u16 reserved:u32
        s.sendall(b"SPSW" + hello[4:6] + bytes(6))

    def close(self):
        for s in self.conns:
            s.close()
        self.listener.close()


def test_ctrl_c_in_a_stream_send():
    # One rank sends ADUs of 4 MiB to a receiver that reads nothing: once the sockets are
    # full, it waits for room in the link's window (1 ADU). (With more ranks, a signal
    # may also find a rank asleep in a collective step of a send, which leaves the ranks'
    # collectives out of step, as an interrupted collective does: the job then ends at
    # finalisation with an error. Rank 0's wait interrupted with other ranks waiting on
    # it is test_ctrl_c_in_a_stream_recv's.)
    rx = StalledReceiver()
    try:
        p, pids, _ = start_announcing(1, "io_sigint.py", "stream-send", "tcp:" + rx.address)
        out, err = interrupt_until_done(p, pids)
    finally:
        rx.close()
    assert p.returncode == 0, (out, err)
    assert "Traceback" not in err, err
    assert lines(out, 0) == ["interrupted", "then: True", "close: True", "done"], out


def test_ctrl_c_in_a_stream_close():
    # One rank's ADUs, more than the sockets buffer, wait on the link's sending thread
    # for a receiver that reads nothing: close() waits for the link's last sends.
    rx = StalledReceiver()
    try:
        p, pids, _ = start_announcing(1, "io_sigint.py", "stream-close", "tcp:" + rx.address)
        out, err = interrupt_until_done(p, pids)
    finally:
        rx.close()
    assert p.returncode == 0, (out, err)
    assert "Traceback" not in err, err
    assert lines(out, 0) == ["interrupted", "then: True", "done"], out
