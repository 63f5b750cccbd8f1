"""The C interface (include/spools.h, libspools) exercised by the C programs of this
directory, each run as a real job with more ranks than the machine has cores. Each C
program asserts its results in C (ctest.h: a failed check prints FAIL with the call, the
status, spools_last_error_message(), the rank and the line, and aborts the job) and prints
`ok ...` lines; here every rank's lines and the exit codes are checked, and what the
programs leave behind (files, pipe records) is checked independently of the library."""

import json
import os
import signal
import subprocess
import threading
import uuid

import numpy as np
import pytest

TYPES = ["i32", "i64", "f64", "u8", "i8", "u16", "i16", "u32", "u64", "f32"]


# ---- messaging, collectives, redistribution ---------------------------------------------

@pytest.mark.parametrize("n", [3, 4])
def test_messaging(cprogs, run, n):
    """send/recv, wildcards, truncation, isend/irecv/test/wait/waitall, cancel, probe,
    4 MiB rendezvous messages, dup and split, 4 threads at once (messaging.c)."""
    job = run(n, [cprogs["messaging"]])
    job.expect_ok(n, ["ring", "wildcards", "truncated", "nonblocking", "cancel", "probe",
                      "large", "comms", "threads", "done"])


@pytest.mark.parametrize("n", [3, 4])
def test_collectives(cprogs, run, n):
    """Every collective, every dtype, the 4 built-in operators, a non-commutative user
    operator and user operators' ctx (collectives.c)."""
    job = run(n, [cprogs["collectives"]])
    job.expect_ok(n, ["reductions " + t for t in TYPES] + ["movement " + t for t in TYPES]
                  + ["barrier", "user-noncommutative", "user-ctx", "done"])


@pytest.mark.parametrize("n", [3, 4])
def test_redistribute(cprogs, run, n):
    """Layout queries and a 13x10 matrix through 5 layouts and back (redistribute.c)."""
    job = run(n, [cprogs["redistribute"]])
    job.expect_ok(n, ["info", "step all-to-rows", "step rows-to-cols", "step cols-to-grid",
                      "step grid-to-two", "step two-to-all", "1d", "done"])


# ---- parallel files ----------------------------------------------------------------------

ROWS, COLS = 61, 47  # files.c's dataset: element (i, j) = i*47 + j + 0.25


def test_files(cprogs, run, spools_bin, tmp_path):
    """files.c writes a dataset in 5 formats and reads each back with other layouts (and a
    RAID-5 file with one damaged unit); here the files themselves are checked: raw bytes,
    `spools cat`, numpy.load, the checksum sidecar, the RAID-5 manifest, `spools fsck`."""
    job = run(3, [cprogs["files"], tmp_path])
    written = ["data.bin", "data.npy", "data.raid5", "data.raid0", "sums.npy", "hurt.raid5",
               "data.h5"]
    job.expect_ok(3, ["write " + f for f in written]
                  + ["read %s cyclic" % f for f in written[:5] + ["data.h5"]]
                  + ["read sums.npy cyclic verified", "read data.bin all", "read data.raid5 all",
                     "read hurt.raid5 cyclic", "done"])
    # The damaged unit was rebuilt from parity, and the read said so.
    assert "hurt.raid5: rebuilt 1 damaged block(s) of unit(s) [1] from parity" in job.err, job

    want = np.arange(ROWS * COLS, dtype=np.float64).reshape(ROWS, COLS) + 0.25
    stream = want.astype("<f8").tobytes()
    assert (tmp_path / "data.bin").read_bytes() == stream
    for f in written:
        r = subprocess.run([spools_bin, "cat", str(tmp_path / f)], capture_output=True,
                           timeout=60)
        assert r.returncode == 0, (f, r.stderr)
        assert r.stdout == stream, "spools cat %s: %d bytes, not the dataset" % (f, len(r.stdout))
    for f in ["data.npy", "sums.npy"]:
        a = np.load(tmp_path / f)
        assert a.dtype == np.float64 and a.shape == (ROWS, COLS), (f, a.dtype, a.shape)
        assert np.array_equal(a, want), f
    # The HDF5 file (the default build loads libhdf5 at run time): an HDF5 file whose
    # dataset grid/data `spools cat FILE:/grid/data` reads as the dataset.
    assert (tmp_path / "data.h5").read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
    r = subprocess.run([spools_bin, "cat", "%s:/grid/data" % (tmp_path / "data.h5")],
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == stream, r.stderr
    sums = json.loads((tmp_path / "sums.npy.spools-sums").read_text())
    assert sums["format"] == "spools-sums" and sums["bytes"] == len(stream), sums
    assert not (tmp_path / "data.npy.spools-sums").exists()

    manifest = json.loads((tmp_path / "data.raid5").read_text())
    assert manifest["layout"] == "raid5(unit=4KiB,count=3)", manifest
    assert manifest["size"] == len(stream) and len(manifest["units"]) == 3, manifest
    assert manifest["dataset"] == "f64[%d,%d] block,* on 3x1" % (ROWS, COLS), manifest
    for u in manifest["units"]:
        assert (tmp_path / u["path"]).stat().st_size == u["bytes"], u
    assert len(json.loads((tmp_path / "data.raid0").read_text())["units"]) == 2

    good = subprocess.run([spools_bin, "fsck", str(tmp_path / "data.raid5")],
                          capture_output=True, text=True, timeout=60)
    assert good.returncode == 0, good
    bad = subprocess.run([spools_bin, "fsck", str(tmp_path / "hurt.raid5")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "unit 1" in bad.stdout + bad.stderr, bad


# ---- parallel pipe: a C producer job, a Rust consumer job --------------------------------

def pipe_jobs(cprogs, consumer, start, finish, tmp_path, records, extra=(), readers=2):
    """Starts the producer (3 ranks, pipe_producer.c) and the consumer (`readers` ranks of
    program `consumer`) at once on a fresh pipe name; returns both Jobs."""
    name = "c-%s" % uuid.uuid4().hex[:12]
    env = {"SPOOLS_PIPE_DIR": str(tmp_path), "SPOOLS_PIPE_TIMEOUT": "60"}
    args = [name, records, PIPE_ROWS, PIPE_COLS]
    producer = start(3, [cprogs["pipe_producer"], *args, *extra], env)
    reader = start(readers, [consumer, *args], env)
    jobs = {}

    def wait(key, started):
        try:
            jobs[key] = finish(*started)
        except BaseException as e:  # noqa: BLE001 (raised below)
            jobs[key] = e

    t = threading.Thread(target=wait, args=("w", producer))
    t.start()
    wait("r", reader)
    t.join()
    for k in ("w", "r"):
        if isinstance(jobs[k], BaseException):
            raise jobs[k]
    return jobs["w"], jobs["r"]


PIPE_ROWS, PIPE_COLS = 13, 10


def expect_consumer(r, records):
    """The consumer's ranks (2, columns dealt cyclically) each report their values' sum."""
    assert r.code == 0, r
    total = 0
    for rank in range(2):
        cols = list(range(rank, PIPE_COLS, 2))
        values = [1000 * k + i * PIPE_COLS + j
                  for k in range(records) for i in range(PIPE_ROWS) for j in cols]
        total += sum(values)
        # (the sums are integers below 2**53: exact in the consumer's f64)
        want = "read %d records, %d values, sum %d, columns %s" % (
            records, len(values), sum(values), ",".join(map(str, cols)))
        got = r.lines(rank)
        assert got[:1] == [want], (rank, got, r)
    assert r.lines(0)[1:] == ["total %d" % total], r


def test_pipe(cprogs, pipe_consumer, start, finish, tmp_path):
    """pipe_producer.c writes 7 records (rows in blocks over 3 ranks) into pipe:NAME;
    examples/pipe_consumer.rs reads them with the columns cyclic over 2 ranks and checks
    every value."""
    w, r = pipe_jobs(cprogs, pipe_consumer, start, finish, tmp_path, 7)
    w.expect_ok(3, ["wrote 7"])
    expect_consumer(r, 7)


def test_pipe_refuses_wrong_shares(cprogs, pipe_consumer, start, finish, tmp_path):
    """Before its records the producer makes wrong calls, each refused without sending
    anything: a read on a writer, a NULL pipe, shares 8 bytes too short and too long (the
    header: SPOOLS_ERR_INVALID_ARG for "a share of the wrong size")."""
    w, r = pipe_jobs(cprogs, pipe_consumer, start, finish, tmp_path, 3, ["--refusals"])
    w.expect_ok(3, ["refused", "wrote 3"])
    expect_consumer(r, 3)


def test_pipe_c_to_c(cprogs, start, finish, tmp_path):
    """The same records read by a C consumer (pipe_reader.c, 4 ranks, column pairs dealt
    cyclically): spools_pipe_open_reader / spools_pipe_read / the end of the stream."""
    w, r = pipe_jobs(cprogs, cprogs["pipe_reader"], start, finish, tmp_path, 5, readers=4)
    w.expect_ok(3, ["wrote 5"])
    r.expect_ok(4, ["read 5"])


def test_pipe_with_no_records(cprogs, pipe_consumer, start, finish, tmp_path):
    """A pipe closed at once: the consumer's first read is the end."""
    w, r = pipe_jobs(cprogs, pipe_consumer, start, finish, tmp_path, 0)
    w.expect_ok(3, ["wrote 0"])
    assert r.code == 0, r
    assert r.lines(0) == ["read 0 records, 0 values, sum 0, columns 0,2,4,6,8", "total 0"], r


# ---- errors ------------------------------------------------------------------------------

ERROR_SECTIONS = {
    "api": ["handles", "args", "layout", "not-found"],
    "missing-file": ["missing-file"],
    "damaged-sums": ["damaged-sums"],
    "damaged-raid5": ["damaged-raid5"],
    "oversized-shares": ["oversized-shares"],
    "aliased-buffers": ["aliased-buffers"],
    "file-kinds": ["file-kinds"],
    "declined": ["declined"],
}


@pytest.mark.parametrize("section", list(ERROR_SECTIONS))
def test_errors(cprogs, run, tmp_path, section):
    """Status codes, spools_strerror and spools_last_error_message of failing calls
    (errors.c; each section its own job)."""
    # No libhdf5 to load for file-kinds (SPOOLS_ERR_UNAVAILABLE).
    job = run(3, [cprogs["errors"], tmp_path, section],
              env={"SPOOLS_HDF5_LIB": str(tmp_path / "no-libhdf5.so")})
    job.expect_ok(3, ["version", "init"] + ERROR_SECTIONS[section] + ["finalize"])


def test_a_failed_check_fails_the_job(cprogs, run, tmp_path):
    """The harness itself: a failing check in a C program (here an unknown section) is
    reported with FAIL, the call and the rank, and fails the whole job."""
    job = run(3, [cprogs["errors"], tmp_path, "no-such-section"], timeout=60)
    assert job.code != 0, job
    assert "FAIL errors rank" in job.err and "unknown section no-such-section" in job.err, job


# ---- active messages, regions, RPC -------------------------------------------------------

@pytest.mark.parametrize("n", [3, 4])
def test_am_rpc(cprogs, run, n):
    """Active-message handlers and RPC functions with ctx pointers, regions with put/get
    (am_rpc.c)."""
    job = run(n, [cprogs["am_rpc"]])
    job.expect_ok(n, ["am-short", "am-batched", "am-progress", "am-bulk", "regions", "rpc",
                      "done"])


# ---- configuration, and the static library -----------------------------------------------

@pytest.mark.parametrize("prog", ["config", "config_static"])
def test_config(cprogs, run, prog):
    """spools_config_string's truncation protocol and content, before and after init;
    config_static is linked against libspools.a."""
    job = run(2, [cprogs[prog], "48KiB"], env={"SPOOLS_EAGER_LIMIT": "48KiB"})
    job.expect_ok(2, ["before-init", "world", "done"])


def test_static_program_does_not_load_libspools(cprogs):
    needed = subprocess.run(["readelf", "-d", str(cprogs["config_static"])],
                            capture_output=True, text=True, check=True).stdout
    assert "libspools" not in needed, needed
    dynamic = subprocess.run(["readelf", "-d", str(cprogs["config"])],
                             capture_output=True, text=True, check=True).stdout
    assert "libspools.so.0" in dynamic, dynamic


def test_config_bad_variable(cprogs, run):
    """A bad SPOOLS_* variable: spools_config_string(NULL, ...) says which (no job)."""
    job = run(1, [cprogs["config"], "--bad"], env={"SPOOLS_EAGER_LIMIT": "banana"},
              launcher=False)
    assert job.code == 0 and job.out.splitlines() == ["ok bad-variable"], job


# ---- frames (the framebuffer protocol), streams into the job -----------------------------

FH, FW = 12, 20  # frames.c's frames


def frame_pixels(stream, n):
    """Frame n of frames.c's stream 1 (grey), 2 (RGB) or 3 (f32 field)."""
    if stream == 1:
        return ((np.arange(FH * FW) + 7 * n) % 256).astype(np.uint8).reshape(FH, FW)
    if stream == 2:
        return ((np.arange(FH * FW * 3) * 5 + 11 * n) % 256).astype(np.uint8).reshape(FH, FW, 3)
    i, j = np.mgrid[0:FH, 0:FW]
    return (n + 0.5 * i + 0.25 * j).astype(np.float32)


def check_frame(adu, stream, n, title, senders=None):
    """A frame's header (docs/view.md's table) and pixels, as frames.c sends them."""
    import struct
    (magic, version, fmt, cmap, width, height, frame, time_us, group, members, title_len,
     lo, hi, _) = struct.unpack("<4sHBBIIQQIHHddQ", adu[:64])
    want_fmt, want_map, want_group = {1: (1, 0, 0), 2: (2, 0, 1), 3: (3, 3, 1)}[stream]
    assert (magic, version, fmt, cmap, width, height, frame, group, members) == \
        (b"SPFB", 1, want_fmt, want_map, FW, FH, n, want_group, 2 if want_group else 0), adu[:64]
    assert adu[64:64 + title_len].decode() == title
    assert (lo, hi) == ((0.0, 10.0) if stream == 3 else (0.0, 0.0))
    assert time_us > 1_600_000_000_000_000
    want = frame_pixels(stream, n)
    assert adu[128:] == want.astype(want.dtype.newbyteorder("<")).tobytes(), (stream, n)


def start_recv(spools_bin, out):
    """`spools recv --out DIR/` on a free port: (process, "HOST:PORT")."""
    recv = subprocess.Popen([spools_bin, "recv", "--out", str(out) + "/", "tcp:127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    line = recv.stderr.readline()  # bounded: recv prints it first, or exits (EOF)
    assert "listening on " in line, line
    return recv, line.split("listening on ", 1)[1].strip()


def end_recv(recv):
    try:
        out, err = recv.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(recv.pid, signal.SIGKILL)
        recv.communicate()
        pytest.fail("spools recv did not end")
    assert recv.returncode == 0, err


@pytest.mark.parametrize("n", [1, 3])
def test_frames_to_spools_recv(cprogs, run, spools_bin, tmp_path, n):
    """frames.c "send": a connection of four streams (grey frames; a lock-step group of an
    RGB image and an f32 field, sent together and one by one; plain ADUs sequenced after
    the grey stream; an ADU of varying size), and the refused calls (not 2-D, a group member missing, lo >= hi, a
    wrong share or colour map on one rank, no such stream, running ahead of the group).
    `spools recv` writes each ADU: every header field and pixel checked here."""
    recv, addr = start_recv(spools_bin, tmp_path)
    try:
        job = run(n, [cprogs["frames"], "send", "tcp:" + addr])
        job.expect_ok(n, ["refused", "sent"])
    finally:
        end_recv(recv)
    names = {"s1-a%d" % k for k in range(3)} | {"s%d-a%d" % (s, k) for s in (2, 3)
                                                for k in range(4)} | {"s4-a0", "s5-a0"}
    assert set(os.listdir(tmp_path)) == names
    for name in names - {"s4-a0", "s5-a0"}:
        s, k = int(name[1]), int(name.split("-a")[1])
        check_frame((tmp_path / name).read_bytes(), s, k, ["grey", "rgb", "field"][s - 1])
    assert (tmp_path / "s4-a0").read_bytes() == bytes(i % n for i in range(40))
    assert (tmp_path / "s5-a0").read_bytes() == b"".join(bytes([r]) * (r + 1) for r in range(n))


@pytest.mark.parametrize("n", [1, 3])
def test_frames_from_a_single_stream(cprogs, run, spools_bin, tmp_path, n):
    """frames.c "writer": spools_stream_send_frame on a spools_stream_t; a wrong share,
    a bad colour map on one rank and a layout that is not 2-D refused on every rank."""
    recv, addr = start_recv(spools_bin, tmp_path)
    try:
        run(n, [cprogs["frames"], "writer", "tcp:" + addr]).expect_ok(n, ["sent 2"])
    finally:
        end_recv(recv)
    assert sorted(os.listdir(tmp_path)) == ["s1-a0", "s1-a1"]
    for k in range(2):
        check_frame((tmp_path / ("s1-a%d" % k)).read_bytes(), 1, k, "writer")


def test_frames_from_c_into_a_c_job(cprogs, start, finish):
    """frames.c "send" on 3 ranks into frames.c "recv" on 2 (spools_stream_listen,
    spools_stream_reader_next / recv / skip): each receiving rank checks its block of
    every ADU, header and pixels, in C; a wrong buffer on one rank is refused on both."""
    cmd, rp = start(2, [cprogs["frames"], "recv", "3"])
    try:
        line = rp.stdout.readline()  # bounded: the job prints it first, or ends (EOF)
        assert "listening on " in line, (line, rp.stderr.read() if not line else "")
        addr = line.split("listening on ", 1)[1].strip()
        scmd, sp = start(3, [cprogs["frames"], "send", "tcp:" + addr])
        finish(scmd, sp).expect_ok(3, ["refused", "sent"])
    finally:
        r = finish(cmd, rp)
    assert r.code == 0, r
    for rank in range(2):
        assert r.ok_lines(rank) == ["received 13"], r
