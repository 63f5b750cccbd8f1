"""Streams out of and into a job (streams.rs), against `spools recv`/`spools send` and
job to job; contents bit-identical."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import PROGS, run_job, spools_bin


def full(k):
    return (np.arange(210, dtype=np.float64) + 1000 * k).reshape(30, 7)


def adu(k):
    """ADU k's bytes as stream_send.py sends it: ADU 1 from an order=F layout, whose
    bytes are the dataset in column-major order (as a Fortran-order .npy file)."""
    return full(k).tobytes(order="F" if k == 1 else "C")


def start_listener(*cmd, marker, stream):
    """Starts `cmd` in its own session; returns (process, address) once it printed
    `marker` and the address on `stream` ("out" or "err")."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    src = p.stdout if stream == "out" else p.stderr
    seen = []
    for line in src:  # bounded: the process ends (closing the pipe) if it fails
        seen.append(line)
        if marker in line:
            return p, line.split(marker, 1)[1].strip()
    p.kill()
    pytest.fail("no %r from %s: %s" % (marker, cmd, "".join(seen)))


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        pytest.fail("listener did not end: %s %s" % (out, err))
    return p.returncode, out, err


@pytest.mark.parametrize("n", [1, 3])
def test_stream_to_spools_recv(run, tmp_path, n):
    p, addr = start_listener(spools_bin(), "recv", "tcp:127.0.0.1:0", "--out", str(tmp_path) + "/",
                             marker="listening on ", stream="err")
    job = run(n, "stream_send.py", "tcp:" + addr)
    assert sorted(job.lines()) == ["sent 3"] * n
    code, _, err = finish(p)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["s1-a0", "s1-a1", "s1-a2"]
    for k in range(3):
        assert (tmp_path / ("s1-a%d" % k)).read_bytes() == adu(k)


def test_stream_from_spools_send(run, tmp_path):
    rng = np.random.default_rng(17)
    files = []
    for i, size in enumerate([5000, 1, 777]):
        f = tmp_path / ("f%d.bin" % i)
        f.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        files.append(str(f))
    job = run(3, "stream_listen.py", "spools-send", spools_bin(), *files)
    assert sorted(job.lines()) == ["received 3 files"] * 3


def listen_job(n, mode):
    cmd = [spools_bin(), "run", "-n", str(n), "--tag-output", "--", sys.executable,
           str(PROGS / "stream_listen.py"), mode]
    return start_listener(*cmd, marker="listening on ", stream="out")


def test_stream_job_to_job(tmp_path):
    p, addr = listen_job(3, "python")
    job = run_job(2, "stream_send.py", addr)
    assert sorted(job.lines()) == ["sent 3"] * 2
    code, out, err = finish(p)
    assert code == 0, (out, err)
    assert sorted(l for l in out.splitlines() if "received" in l) == \
        ["[%d] received 3" % r for r in range(3)], out


def test_stream_sender_dies(tmp_path):
    p, addr = listen_job(2, "python-die")
    job = run_job(2, "stream_send.py", addr, "die", check=False)
    assert job.code != 0 and "the sender fails after 2 ADUs" in job.err, job
    code, out, err = finish(p)
    assert code == 0, (out, err)
    # The first ADU had left when the second send returned (a window of 1); the second
    # may or may not have: an abandoned stream stops its links at once. Either way every
    # rank sees the sender gone, at the same point.
    gone = sorted(l for l in out.splitlines() if "sender gone" in l)
    assert gone in (["[0] sender gone after %d" % k, "[1] sender gone after %d" % k]
                    for k in (1, 2)), (out, err)


def test_stream_proves_the_job_secret(run, tmp_path):
    """A receiver that requires the job's secret (`spools recv --secret FILE`) takes a
    stream from a job started with it (`spools run --secret FILE`) and refuses one from
    a job with another secret."""
    secret = tmp_path / "secret"
    secret.write_text(subprocess.run([spools_bin(), "secret"], capture_output=True, text=True,
                                     check=True).stdout)
    out = tmp_path / "out"
    out.mkdir()
    p, addr = start_listener(spools_bin(), "recv", "tcp:127.0.0.1:0", "--out", str(out) + "/",
                             "--secret", str(secret), marker="listening on ", stream="err")
    try:
        # Another job's secret: refused, every rank fails, nothing received.
        other = run(2, "stream_send.py", "tcp:" + addr, check=False)
        assert other.code != 0, other
        assert os.listdir(out) == []
        # The job's own: received, bit-identical.
        job = run(2, "stream_send.py", "tcp:" + addr,
                  launcher_args=("--tag-output", "--secret", str(secret)))
        assert sorted(job.lines()) == ["sent 3"] * 2
    finally:
        code, _, err = finish(p)
    assert code == 0, err
    for k in range(3):
        assert (out / ("s1-a%d" % k)).read_bytes() == adu(k)
