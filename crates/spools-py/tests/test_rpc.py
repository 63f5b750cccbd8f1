"""RPC of Python functions between ranks (am.rs, _am.py)."""

import pytest


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_rpc_calls(run, n):
    job = run(n, "rpc_calls.py", timeout=120)
    for r in range(n):
        assert job.lines(r)[-1:] == ["ok"], job
    if n >= 2:
        assert job.lines(1) == ["rank 1 interrupted", "ok"], job


@pytest.mark.parametrize("n", [2, 4])
def test_rpc_served_while_blocked(run, n):
    """A rank waiting in a Spools call (GIL released) runs the calls on its own thread."""
    job = run(n, "rpc_serve.py", "blocked", timeout=120)
    assert job.lines(0)[0] == "served %d" % (n - 1)
    for r in range(1, n):
        assert job.lines(r) == ["ran on main thread: [True]", "done"], job


def test_rpc_served_while_finalizing(run):
    """A rank that finished its work serves calls until every rank has finalised."""
    job = run(3, "rpc_serve.py", "finalized", timeout=120)
    assert job.lines(0) == ["served 2", "done"], job
    for r in (1, 2):
        assert job.lines(r) == ["done"], job


def test_rpc_served_while_busy_in_python(run):
    """With the progress thread, a rank computing in Python serves calls (the thread
    takes the GIL between the rank's own statements)."""
    job = run(3, "rpc_serve.py", "busy", timeout=120, env={"SPOOLS_PROGRESS_THREAD": "1"})
    assert job.lines(0)[0] == "served 2"
    for r in (1, 2):
        assert job.lines(r) == ["ran on main thread: [False]", "done"], job


def test_rpc_call_interrupted():
    """Ctrl-C (SIGINT) interrupts a call waiting for a rank busy in Python."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import PROGS, spools_bin

    cmd = [spools_bin(), "run", "-n", "2", "--tag-output", "--", sys.executable,
           str(PROGS / "rpc_interrupt.py")]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        pid = None
        for line in p.stdout:
            if line.startswith("[0] pid "):
                pid = int(line.split()[-1])
                break
        assert pid is not None, p.stderr.read()
        for _ in range(30):  # until the job ends (a SIGINT before the call is ignored)
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:  # it just ended
                pass
            try:
                out, err = p.communicate(timeout=2)
                break
            except subprocess.TimeoutExpired:
                pass
        else:
            raise AssertionError("the call was not interrupted")
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    assert "[0] interrupted" in out, (out, err)
    assert "not interrupted" not in out
    assert p.returncode != 0


def test_rpc_sys_exit_goes_back_to_caller(run):
    """sys.exit() in an RPC function is the caller's RemoteError (remote_type
    "SystemExit"); it does not end the serving rank, nor later the job."""
    job = run(2, "rpc_sysexit.py", check=False, timeout=120)
    assert job.code == 0, job
    assert job.lines(0) == ["caller saw SystemExit", "ok"], job
    assert job.lines(1) == ["ok"], job
