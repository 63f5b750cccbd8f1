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


# ---- frames (the framebuffer protocol) -----------------------------------------------------

def load_prog(name):
    """A program of progs/ as a module (its functions; its job runs only as __main__)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, PROGS / (name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def decode_frame(adu):
    """A frame's header fields (docs/view.md, "The framebuffer protocol") and its pixels."""
    import struct
    assert len(adu) >= 128, len(adu)
    (magic, version, fmt, cmap, width, height, frame, time_us, group, members, title_len,
     lo, hi, _reserved) = struct.unpack("<4sHBBIIQQIHHddQ", adu[:64])
    assert magic == b"SPFB" and version == 1, adu[:8]
    title = adu[64:64 + title_len].decode()
    dtype, shape = {1: (np.uint8, (height, width)), 2: (np.uint8, (height, width, 3)),
                    3: (np.dtype("<f4"), (height, width)),
                    4: (np.dtype("<f8"), (height, width))}[fmt]
    pixels = np.frombuffer(adu[128:], dtype=dtype)
    assert pixels.size == int(np.prod(shape)), (len(adu), shape)
    return dict(format=fmt, colormap=cmap, width=width, height=height, frame=frame,
                time_us=time_us, group=group, members=members, title=title, lo=lo, hi=hi,
                pixels=pixels.reshape(shape))


def recv_to(tmp_path, n_conn=1):
    return start_listener(spools_bin(), "recv", "tcp:127.0.0.1:0", "--out", str(tmp_path) + "/",
                          "--connections", str(n_conn), marker="listening on ", stream="err")


@pytest.mark.parametrize("n", [1, 3])
def test_frames_of_several_streams_and_a_lock_step_group(run, tmp_path, n):
    """stream_frames.py "connection": grey frames, a lock-step group of an RGB image and an
    f32 field (send_frames), one by one in step, plain ADUs sequenced after the grey
    stream, an ADU of varying size (send_var); the refused calls (not 2-D, a group member missing, lo >= hi, a wrong share,
    a stream not open, running ahead of the group) send nothing. Read back from `spools
    recv`: every header field and every pixel."""
    import time
    frames = load_prog("stream_frames")
    p, addr = recv_to(tmp_path)
    before = int(time.time() * 1e6)
    job = run(n, "stream_frames.py", "tcp:" + addr, "connection")
    assert sorted(job.lines()) == ["sent frames"] * n
    code, _, err = finish(p)
    assert code == 0, err
    after = int(time.time() * 1e6)
    want = {"s1-a%d" % k for k in range(3)} | {"s%d-a%d" % (s, k) for s in (2, 3)
                                               for k in range(4)} | {"s4-a0", "s5-a0"}
    assert set(os.listdir(tmp_path)) == want
    expect = {1: (frames.grey, 1, 0, "grey", 0.0, 0.0, 0, 0),
              2: (frames.rgb, 2, 0, "rgb", 0.0, 0.0, 1, 2),
              3: (frames.field, 3, 3, "field", 0.0, 10.0, 1, 2)}
    for name in sorted(want - {"s4-a0", "s5-a0"}):
        s, k = int(name[1]), int(name.split("-a")[1])
        make, fmt, cmap, title, lo, hi, group, members = expect[s]
        h = decode_frame((tmp_path / name).read_bytes())
        assert (h["format"], h["colormap"], h["width"], h["height"], h["frame"], h["group"],
                h["members"], h["title"], h["lo"], h["hi"]) == \
            (fmt, cmap, 20, 12, k, group, members, title, lo, hi), (name, h)
        assert before <= h["time_us"] <= after, (name, h["time_us"], before, after)
        assert np.array_equal(h["pixels"], make(k)), name
    raw = (tmp_path / "s4-a0").read_bytes()
    assert raw == bytes(i % n for i in range(40))
    assert (tmp_path / "s5-a0").read_bytes() == b"".join(bytes([r]) * (r + 1) for r in range(n))


@pytest.mark.parametrize("n", [1, 3])
def test_frames_from_a_single_stream_writer(run, tmp_path, n):
    """StreamWriter.send_frame (stream_open): numbered frames with their header; a wrong
    share on one rank and a layout that is not 2-D refused on every rank."""
    frames = load_prog("stream_frames")
    p, addr = recv_to(tmp_path)
    job = run(n, "stream_frames.py", "tcp:" + addr, "writer")
    assert sorted(job.lines()) == ["sent 2 frames"] * n
    code, _, err = finish(p)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["s1-a0", "s1-a1"]
    for k in range(2):
        h = decode_frame((tmp_path / ("s1-a%d" % k)).read_bytes())
        assert (h["format"], h["frame"], h["title"], h["group"]) == (1, k, "writer", 0), h
        assert np.array_equal(h["pixels"], frames.grey(k))
