"""Errors: wrong arguments (TypeError/ValueError naming expected and given), the
exception classes where they belong (TruncatedError, PeerGoneError, FinalizedError),
Ctrl-C in a blocked rank and in the launcher, a rank that raises."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROGS, spools_bin, start_announcing


def shm_leftovers(job):
    """What the job left in /dev/shm (its names start with spools-<job id>)."""
    return sorted(p for p in os.listdir("/dev/shm") if p.startswith("spools-%s" % job))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_argument_errors_truncation_finalized(run, n):
    job = run(n, "err_args.py")
    assert sorted(job.lines()) == sorted("errors ok rank %d" % r for r in range(n))


@pytest.mark.parametrize("n", [2, 4])
def test_peer_that_dies_is_peer_gone(run, n):
    job = run(n, "err_peergone.py", check=False)
    assert job.code != 0, job
    for r in range(n):
        if r == 1:
            continue
        got = [l for l in job.lines(r) if l.startswith("peergone ok")]
        assert len(got) == 1 and "rank 1" in got[0], job
    assert "recv returned" not in job.out


@pytest.mark.parametrize("n,bad", [(2, 1), (3, 0), (5, 3)])
def test_rank_that_raises_ends_the_job_one_traceback(run, n, bad):
    job = run(n, "err_raise.py", bad, check=False)
    assert job.code != 0, job
    assert job.err.count("Traceback") == 1, job
    tb = [l for l in job.err.splitlines() if l.startswith("[%d] " % bad)]
    assert any("ValueError: boom from rank %d (42)" % bad in l for l in tb), job
    assert any("Traceback" in l for l in tb), job
    notes = job.err.count("this rank stopped because the job is ending")
    assert notes == n - 1, job
    assert "recv returned" not in job.out
    ids = {l.split()[1] for l in job.lines() if l.startswith("job ")}
    assert len(ids) == 1, job
    assert shm_leftovers(ids.pop()) == []


def start(n, *args):
    return start_announcing(n, "err_sigint.py", *args)


def wait_asleep(pid):
    """Returns once process `pid` is asleep (a state the kernel reports, polled: the
    event is the rank going to sleep in its wait), within a bound."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rpartition(")")[2].split()[0]
        if state == "S":
            return
        os.sched_yield()
    pytest.fail("rank %d never went to sleep" % pid)


def finish(p):
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("the job did not end after SIGINT\n%s\n%s" % (out, err))
    return p.returncode, out, err


@pytest.mark.parametrize("n,target,how", [(2, 1, "recv"), (3, 0, "wait"), (4, 2, "recv")])
def test_ctrl_c_in_a_blocked_rank(n, target, how):
    p, pids, job = start(n, how)
    # The rank printed its pid just before it blocks; once it sleeps (its state in
    # /proc is S: asleep in the receive's wait) the signal must end that wait.
    # The program ignores a SIGINT that lands before its call: send it until the job
    # ends (decided by the job's end, not by timing).
    wait_asleep(pids[target])
    for _ in range(30):
        try:
            os.kill(pids[target], signal.SIGINT)
        except ProcessLookupError:  # it just ended
            pass
        try:
            p.wait(timeout=2)
            break
        except subprocess.TimeoutExpired:
            pass
    code, out, err = finish(p)
    assert code != 0, (out, err)
    lines = [l for l in err.splitlines() if l.startswith("[%d] " % target)]
    assert any(l.endswith("KeyboardInterrupt") for l in lines), err
    # Raised by the blocked call itself.
    call = "world.Recv(buf" if how == "recv" else ".wait()"
    assert call in "\n".join(lines), err
    assert err.count("Traceback") == 1, err
    assert err.count("this rank stopped because the job is ending") == n - 1, err
    assert "recv returned" not in out
    assert shm_leftovers(job) == []


def test_ctrl_c_to_the_launcher_stops_the_job():
    p, pids, job = start(3, "recv")
    os.kill(p.pid, signal.SIGINT)
    code, out, err = finish(p)
    assert code != 0, (out, err)
    assert "recv returned" not in out
    for pid in pids.values():
        # Every rank is gone (not left running in the background).
        assert not os.path.exists("/proc/%d" % pid) or \
            open("/proc/%d/stat" % pid).read().split()[2] == "Z", pid
    assert shm_leftovers(job) == []


# One exception class per kind of file failure (the C statuses follow the same kinds,
# crates/spools-c/tests/errors.c): a job of 2 ranks runs one case; every rank raises the
# same class (exactly it, not a subclass or a base), with a message saying why.
FILE_ERRORS = r'''
import json, os, sys
import numpy as np
import spools

world = spools.init()
d, case = sys.argv[1], sys.argv[2]
P, me = world.size, world.rank
spec = "i32[8,6] block,* on %dx1" % P
mine = np.arange(8 * 6, dtype=np.int32).reshape(8, 6)[me * 8 // P:(me + 1) * 8 // P].copy()
path = os.path.join(d, "a.zarr")


def expect(cls, fn, *words):
    try:
        fn()
    except Exception as e:
        assert type(e) is cls, (cls, type(e), str(e))
        for w in words:
            assert w in str(e), (w, str(e))
        print("%s raised %s: %s" % (case, type(e).__name__, str(e).splitlines()[0]))
        return e
    raise AssertionError("no %s" % cls.__name__)


def rank0(f):
    if me == 0:
        f()
    world.barrier()


if case == "unsupported-codec":
    # A well-formed array whose chunks use a codec Spools does not implement.
    world.write_file(path, mine, spec, format="zarr(chunk=4x6)")
    def blosc():
        m = json.load(open(os.path.join(path, "zarr.json")))
        m["codecs"] = [{"name": "bytes", "configuration": {"endian": "little"}},
                       {"name": "blosc", "configuration": {"cname": "lz4"}}]
        json.dump(m, open(os.path.join(path, "zarr.json"), "w"))
    rank0(blosc)
    e = expect(spools.UnsupportedError, lambda: world.read_file(path, spec), "blosc")
    assert not isinstance(e, spools.FileDamageError)
elif case == "unsupported-sharded-bytes":
    b = np.zeros((mine.shape[0], 6, 3), dtype=np.uint8)
    expect(spools.UnsupportedError,
           lambda: world.write_file(path, b, "bytes(3)[8,6] block,* on %dx1" % P,
                                    format="zarr(chunk=2x6,shard=4x6)"),
           "shard", "#3054")
elif case == "bad-spec":
    # A zarr(...) spec that parses but does not fit the layout: an argument, not damage.
    e = expect(spools.InvalidArgumentError,
               lambda: world.write_file(path, mine, spec, format="zarr(chunk=4)"), "chunk shape")
    assert isinstance(e, ValueError) and isinstance(e, spools.SpoolsError)
elif case == "unavailable-hdf5":
    # No libhdf5 to load (or a build without HDF5): a missing piece, not a damaged file.
    expect(spools.UnavailableError,
           lambda: world.write_file(os.path.join(d, "a.h5"), mine, spec, format="hdf5(data)"), "HDF5")
elif case == "damaged":
    world.write_file(path, mine, spec, format="zarr(chunk=4x6)")
    def flip():
        with open(os.path.join(path, "c", "1", "0"), "r+b") as f:
            f.seek(5)
            x = f.read(1)
            f.seek(5)
            f.write(bytes([x[0] ^ 0xFF]))
    rank0(flip)
    expect(spools.FileDamageError, lambda: world.read_file(path, spec), "CRC32C")
print("case ok")
'''


@pytest.mark.parametrize("case,cls", [
    ("unsupported-codec", "UnsupportedError"),
    ("unsupported-sharded-bytes", "UnsupportedError"),
    ("bad-spec", "InvalidArgumentError"),
    ("unavailable-hdf5", "UnavailableError"),
    ("damaged", "FileDamageError"),
])
def test_each_kind_of_file_failure_has_its_class(run, tmp_path, case, cls):
    prog = tmp_path / "file_errors.py"
    prog.write_text(FILE_ERRORS)
    job = run(2, prog, tmp_path, case, env={"SPOOLS_HDF5_LIB": str(tmp_path / "no-libhdf5.so")})
    for r in range(2):
        lines = job.lines(r)
        assert lines[-1:] == ["case ok"], job
        assert lines[0].startswith("%s raised %s: " % (case, cls)), job
