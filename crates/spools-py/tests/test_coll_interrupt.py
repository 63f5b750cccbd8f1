"""Ctrl-C in a rank blocked in a collective: the collective's wait ends with
KeyboardInterrupt raised by the collective call itself, and the job stops with that one
traceback (the other ranks stop with a one-line note), leaving nothing in /dev/shm."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import PROGS, spools_bin


def start(n, target, how):
    cmd = [spools_bin(), "run", "-n", str(n), "--tag-output", "--", sys.executable,
           str(PROGS / "coll_sigint.py"), str(target), how]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    pids, jobs = {}, set()
    try:
        while len(pids) < n:
            line = p.stdout.readline()
            if not line:
                break
            text = line.partition("] ")[2].split()
            if text[:1] == ["pid"]:
                pids[int(text[1])] = int(text[2])
                jobs.add(text[3])
    except Exception:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    if len(pids) != n or len(jobs) != 1:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail("the ranks did not start: %s" % p.communicate()[1])
    return p, pids, jobs.pop()


def wait_asleep(pid):
    """Returns once process `pid` is seen asleep (its state in /proc: the event is the
    rank going to sleep in its wait, after it printed its pid), within a bound. A
    collective's wait wakes now and then: the polls are spaced (2 ms, not a timing
    assumption) so that they do not keep the 2 cores from the rank they watch."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rpartition(")")[2].split()[0]
        if state == "S":
            return
        time.sleep(0.002)
    pytest.fail("rank process %d never went to sleep" % pid)


@pytest.mark.parametrize("n,target,how,call", [
    (2, 0, "allreduce", "world.allreduce("),
    (3, 1, "wait", ".wait()"),
    (3, 2, "scatter", "world.scatter("),
    (4, 3, "gatherv", "world.gatherv("),
])
def test_ctrl_c_in_a_collective(n, target, how, call):
    p, pids, job = start(n, target, how)
    wait_asleep(pids[target])
    os.kill(pids[target], signal.SIGINT)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("the job did not end after SIGINT\n%s\n%s" % (out, err))
    assert p.returncode != 0, (out, err)
    lines = [l for l in err.splitlines() if l.startswith("[%d] " % target)]
    assert any(l.endswith("KeyboardInterrupt") for l in lines), err
    assert call in "\n".join(lines), err
    assert err.count("Traceback") == 1, err
    assert "collective returned" not in out
    assert sorted(x for x in os.listdir("/dev/shm") if x.startswith("spools-%s" % job)) == []
