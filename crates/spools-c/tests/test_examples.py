"""examples/c/hello.c built and run exactly as the README says: installed header and
library, flags from pkg-config, `spools run -n 4`; every rank's lines checked."""

import os
import re
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
