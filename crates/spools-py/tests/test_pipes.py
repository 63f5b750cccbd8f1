"""Parallel pipes between two separately launched jobs (pipes.rs): 2 producer ranks with
rows in blocks, 3 consumer ranks with columns cyclic."""

import os
import threading
import uuid

from conftest import run_job


def both(tmp_path, writer, reader, timeout=90):
    """Runs the producer and consumer jobs at once; returns both Jobs."""
    name = "pipe:t-%s" % uuid.uuid4().hex[:12]
    env = {"SPOOLS_PIPE_DIR": str(tmp_path), "SPOOLS_PIPE_TIMEOUT": "30"}
    out = {}

    def go(key, n, prog, *args):
        try:
            out[key] = run_job(n, prog, name, *args, timeout=timeout, env=env, check=False)
        except BaseException as e:  # noqa: BLE001 (reported below)
            out[key] = e

    t = threading.Thread(target=go, args=("w", writer[0], "pipe_write.py", *writer[1:]))
    t.start()
    go("r", reader[0], "pipe_read.py", *reader[1:])
    t.join()
    for k in ("w", "r"):
        if isinstance(out[k], BaseException):
            raise out[k]
    return out["w"], out["r"]


def test_pipe_records(tmp_path):
    w, r = both(tmp_path, (2, 5), (3,))
    assert w.code == 0 and r.code == 0, (w, r)
    for rank in range(2):
        assert w.lines(rank) == ["wrote 5"], w
    for rank in range(3):
        assert r.lines(rank) == ["read 5"], r


def test_pipe_oversubscribed_no_records(tmp_path):
    # 4 + 5 ranks on 2 cores; a pipe closed without records ends the reader at once.
    w, r = both(tmp_path, (4, 0), (5,))
    assert w.code == 0 and r.code == 0, (w, r)
    assert sorted(r.lines()) == ["read 0"] * 5, r


def test_pipe_producer_dies(tmp_path):
    w, r = both(tmp_path, (2, 5, "die"), (3, "die"))
    assert w.code != 0 and "the producer fails after 2 records" in w.err, w
    assert r.code == 0, r
    for rank in range(3):
        assert r.lines(rank) == ["producer gone after 2: True"], r


def test_pipe_fortran_order_and_finalized(tmp_path):
    # An order=F layout on one side, a C one on the other, both ways; then every call
    # after finalize raises FinalizedError.
    w, r = both(tmp_path, (2, 3, "F"), (3, "F"))
    assert w.code == 0 and r.code == 0, (w, r)
    for rank in range(2):
        assert w.lines(rank) == ["F wrote 3"], w
    for rank in range(3):
        assert r.lines(rank) == ["F read 3 3"], r


def test_pipe_layout_mismatch(tmp_path):
    w, r = both(tmp_path, (2, 1, "mismatch"), (3, "mismatch"))
    assert w.code == 0 and r.code == 0, (w, r)
    assert sorted(w.lines()) == ["layout error: True"] * 2, w
    assert sorted(r.lines()) == ["layout error: True"] * 3, r


def shell(cmd, timeout=90):
    """Runs a shell pipeline of launchers; returns (code, out, err)."""
    import signal
    import subprocess

    p = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError("pipeline did not end: %r %r" % (out, err))
    if p.returncode != 0:
        # In full (an assertion message on the bytes is cut short): pytest shows the
        # captured output of a failed test.
        print("pipeline %r ended with %d; its stderr:\n%s" % (cmd, p.returncode, err.decode(errors="replace")))
    return p.returncode, out, err


def test_pipe_names_from_the_launcher(tmp_path):
    """No name: the launcher's choice. To a file (stdout: the canonical byte stream of
    each record), from it (stdin), and launcher to launcher (rank to rank)."""
    import shlex
    import sys

    import numpy as np

    from conftest import PROGS, spools_bin

    def launch(n, prog, *args):
        return " ".join(shlex.quote(str(a)) for a in
                        [spools_bin(), "run", "-n", n, "--", sys.executable, PROGS / prog, *args])

    out = tmp_path / "records.bin"
    code, _, err = shell("%s > %s" % (launch(2, "pipe_write.py", "-", 3), shlex.quote(str(out))))
    assert code == 0, err
    want = b"".join((np.arange(120, dtype=np.float64) + 1000 * k).tobytes() for k in range(3))
    assert out.read_bytes() == want
    code, so, err = shell("%s < %s" % (launch(3, "pipe_read.py", "-"), shlex.quote(str(out))))
    assert code == 0, err
    assert so.count(b"read 3") == 3, so  # (untagged output: lines may interleave)
    code, so, err = shell("%s | %s" % (launch(2, "pipe_write.py", "-", 4),
                                       launch(3, "pipe_read.py", "-")))
    assert code == 0, err
    assert so.count(b"read 4") == 3, so
    assert err.decode().count("wrote 4") == 2, err
