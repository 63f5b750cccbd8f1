"""Fixtures of the format tests: the workspace's `spools` binary, and jobs run with it."""

import os
import subprocess

import pytest

SPOOLS = os.environ.get("SPOOLS_BIN", "")


def spools(*args, timeout=120, check=True):
    """Runs the spools tool (`spools ls`, `cat`, `fsck`): a bounded wait, output kept."""
    p = subprocess.run([SPOOLS, *args], capture_output=True, timeout=timeout)
    if check:
        assert p.returncode == 0, (args, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))
    return p


def job(n, *args, timeout=180, check=True):
    """Runs `spools run -n N -- spools ARGS...` (real ranks as separate processes); the
    launcher's own bound ends it, and the wait is bounded too."""
    p = subprocess.run(
        [SPOOLS, "run", "-n", str(n), "--", SPOOLS, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


@pytest.fixture(autouse=True)
def _needs_binary():
    if not SPOOLS or not os.access(SPOOLS, os.X_OK):
        pytest.fail("SPOOLS_BIN must name the spools binary (scripts/test-formats.sh sets it)")
