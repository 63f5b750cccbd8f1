"""examples/c/hello.c built and run exactly as the README says: installed header and
library, flags from pkg-config, `spools run -n 4`; every rank's lines checked."""

import os
import re
import select
import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _run(cmd, timeout, **kw):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("%s did not end within %ds\n%s\n%s" % (cmd, timeout, out, err))
    return p.returncode, out, err


def test_hello_as_the_readme_builds_it(tmp_path):
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "spools"], check=True,
                           capture_output=True, text=True).stdout.split()
    assert "-lspools" in flags, flags
    exe = tmp_path / "hello"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    str(REPO / "examples/c/hello.c"), *flags, "-o", str(exe)], check=True)
    spools = os.environ.get("SPOOLS_BIN", str(REPO / "target/debug/spools"))
    code, out, err = _run([spools, "run", "-n", "4", "--tag-output", "--", str(exe)], 120)
    assert code == 0, (out, err)
    for r in range(4):
        lines = [l for l in out.splitlines() if l.startswith("[%d] " % r)]
        greeted = sorted(int(m.group(1)) for l in lines
                         for m in [re.search(r"greeting from rank (\d+) \(it says (\d+)\)", l)] if m)
        assert greeted == sorted(set(range(4)) - {r}), lines
        left = (r + 3) % 4
        assert any('my region says "written by rank %d"; 1 + ... + 4 = 10' % left in l
                   for l in lines), lines


def test_stream_from_c_to_spools_recv(tmp_path):
    """A C job streams 5 frames over 3 links to `spools recv`, which writes them in order:
    the file holds exactly the frames the C ranks computed."""
    import numpy as np

    src = Path(__file__).resolve().parent / "c_stream.c"
    exe = tmp_path / "c_stream"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "spools"], check=True,
                           capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", str(src),
                    *flags, "-o", str(exe)], check=True)
    spools = os.environ.get("SPOOLS_BIN", str(REPO / "target/debug/spools"))
    out = tmp_path / "frames.bin"
    recv = subprocess.Popen([spools, "recv", "--out", str(out), "tcp:127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        # spools recv prints the address it listens on (first line of stderr).
        ready, _, _ = select.select([recv.stderr], [], [], 60)
        assert ready, "spools recv said nothing within 60 s"
        line = recv.stderr.readline()
        m = re.search(r"(127\.0\.0\.1:\d+)", line)
        assert m, line
        code, o, e = _run([spools, "run", "-n", "3", "--tag-output", "--", str(exe),
                           m.group(1), "3", "5"], 120)
        assert code == 0, (o, e)
        assert sum("sent 5 frames" in l for l in o.splitlines()) == 3, o
        rc = recv.wait(timeout=60)
        assert rc == 0, recv.stderr.read()
    finally:
        if recv.poll() is None:
            os.killpg(recv.pid, signal.SIGKILL)
            recv.wait()
    got = np.fromfile(out, dtype="<u4").reshape(5, 12, 10)
    want = np.array([[[k * 1000000 + i * 10 + j for j in range(10)] for i in range(12)]
                     for k in range(5)], dtype="<u4")
    assert (got == want).all()
