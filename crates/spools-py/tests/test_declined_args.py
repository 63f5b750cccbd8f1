"""Arguments refused on one rank only (issue 58, "Known hangs"): a bad `layout`, `format`,
`style` or group item on one rank declines that rank's part of the collective call, so
that every rank raises (that rank its own error, the others the same class naming it)
instead of the others waiting for it. Without the decline the other ranks hang in the
call's agreement; these jobs are bounded, so a hang fails the test."""

import os

import numpy as np

from conftest import spools_bin
from test_streams import finish, recv_to

TIMEOUT = 90  # a job of these takes a few seconds; a hang is cut short


def test_files_redistribute_and_pipe_openings(run, tmp_path):
    """write_file (layout, format), read_file, redistribute (a layout; a plan that fails
    on one rank alone), pipe_writer and pipe_reader (a layout): each refused on every
    rank; the next calls meet as usual."""
    job = run(3, "decline_args.py", "io", tmp_path, timeout=TIMEOUT,
              env={"SPOOLS_PIPE_DIR": str(tmp_path), "SPOOLS_PIPE_TIMEOUT": "20"})
    assert sorted(job.lines()) == ["declined ok"] * 3, job


def grey(k, h=12, w=20):
    return ((np.arange(h * w) + 7 * k) % 256).astype(np.uint8).reshape(h, w)


def test_stream_sends(run, tmp_path):
    """StreamConnection.send / send_frame / send_group / send_frames and
    StreamWriter.send_frame with a bad layout, style or group item on one rank: refused on
    every rank and nothing sent (the receivers get only the good calls' ADUs)."""
    conn, writer = tmp_path / "conn", tmp_path / "writer"
    conn.mkdir()
    writer.mkdir()
    p1, a1 = recv_to(conn)
    p2, a2 = recv_to(writer)
    try:
        job = run(3, "decline_args.py", "send", "tcp:" + a1, "tcp:" + a2, timeout=TIMEOUT)
    finally:
        r1, r2 = finish(p1), finish(p2)
    assert sorted(job.lines()) == ["declined ok"] * 3, job
    assert r1[0] == 0 and r2[0] == 0, (r1, r2)
    assert sorted(os.listdir(conn)) == sorted(
        ["s1-a0", "s1-a1", "s1-a2", "s2-a0", "s2-a1", "s3-a0", "s3-a1", "s4-a0", "s5-a0",
         "s6-a0"])
    assert sorted(os.listdir(writer)) == ["s1-a0", "s1-a1"]
    # Frames carry a 128-byte header before the pixels; plain ADUs are the pixels alone.
    for k in range(3):
        assert (conn / ("s1-a%d" % k)).read_bytes()[128:] == grey(k).tobytes()
    for s in (2, 3):
        for k in range(2):
            assert (conn / ("s%d-a%d" % (s, k))).read_bytes()[128:] == grey(k).tobytes()
    for s in (4, 5, 6):
        assert (conn / ("s%d-a0" % s)).read_bytes() == grey(0).tobytes()
    for k in range(2):
        assert (writer / ("s1-a%d" % k)).read_bytes()[128:] == grey(k).tobytes()


def test_stream_recv(run, tmp_path):
    """StreamReader.recv with a bad layout on one rank: refused on every rank, and the
    ADU stays the next one."""
    f = tmp_path / "adu.bin"
    f.write_bytes(bytes(range(256)) * 3)
    job = run(3, "decline_args.py", "recv", spools_bin(), f, timeout=TIMEOUT)
    assert sorted(job.lines()) == ["declined ok"] * 3, job
