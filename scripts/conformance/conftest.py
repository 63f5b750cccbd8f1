"""Shared helpers for the conformance clients: where the `spools` binary is, and a
bounded wait for the processes a test starts."""

import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def spools_bin():
    path = os.environ.get("SPOOLS_BIN", "target/debug/spools")
    if not os.path.exists(path):
        pytest.fail(f"no spools binary at {path}: build it with cargo build -p spools-cli")
    return os.path.abspath(path)


@pytest.fixture
def procs():
    """Processes started by a test; every one still running at the end is killed."""
    started = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
