"""The live viewer in a real browser (headless Chromium): frames of `spools demo vcr` (four
cameras in one lock-step group from 8 ranks), `spools demo heat --view`, and a Python job
and a C job sending frames through their interfaces, checked on the page's pixels, lock
step, frame counts, the end of a job, slow and closing browsers, garbage on both ports,
the token beyond loopback, and "save this frame as PNG"."""

import io
import os
import re
import shlex
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
import urllib.error
import urllib.request

import pytest
from PIL import Image
from selenium.webdriver.common.by import By

from conftest import (SPOOLS, TIMEOUT, Proc, colour, f32, palette, round_half_away, vcr,
                      view_state, wait_page)

W, H, CAMS = 256, 128, 4


def on_bar(c, n, x, w=W, cams=CAMS):
    bar = (n * 4 + c * w // cams) % w
    return (x + w - bar) % w < max(w // 32, 2)


def expected(c, n, x, y):
    """What camera c of `spools demo vcr` shows at (x, y) of frame n (vcr.rs)."""
    if c == CAMS - 1:
        if x < 32 and y < 32:
            v = f32(f32(n % 256) / f32(255.0))
        elif on_bar(c, n, x):
            v = 1.0
        else:
            v = f32(f32(f32(x) / f32(W - 1)) * f32(0.9))
        return palette("viridis")[min(max(round_half_away(v * 255.0), 0), 255)]
    if x < 32 and y < 32:
        return (n % 256, (n // 256) % 256, (60 * c) % 256)
    if on_bar(c, n, x):
        return (255, 255, 255)
    return (x * 255 // (W - 1), y * 255 // (H - 1), (128 + 40 * c) % 256)


def frame_of_corner(c, rgb, exact=True):
    """The frame number (mod 256 for the field camera; and for the others when the colours
    are not exact, as through JPEG) a panel's corner block shows."""
    if c == CAMS - 1:
        pal = palette("viridis")
        return min(range(256), key=lambda i: sum(abs(a - b) for a, b in zip(pal[i], rgb)))
    return rgb[0] + 256 * rgb[1] if exact else rgb[0]


def near_an_edge(c, n, x, y):
    """Whether (x, y) is within 3 pixels of the corner block or the bar (JPEG blurs edges)."""
    if x < 36 and y < 36:
        return True
    return len({on_bar(c, n, (x + dx) % W) for dx in range(-3, 4)}) > 1


def panels_by_camera(s):
    return {int(p["title"].split()[-1]): (pid, p) for pid, p in s["panels"].items() if p["title"]}


def canvases(d):
    return d.execute_script(
        "return [...document.querySelectorAll('.panel canvas')].map(c => "
        "{ const r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });")


def screenshot(d):
    """A screenshot during which no panel moved."""
    for _ in range(5):
        before = canvases(d)
        shot = Image.open(io.BytesIO(d.get_screenshot_as_png())).convert("RGB")
        if canvases(d) == before:
            return shot
    raise AssertionError("the panels kept moving")


def canvas_origin(d, pid):
    r = d.execute_script(
        "const r = document.querySelector(`.panel[data-id='${arguments[0]}'] canvas`)"
        ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height];", pid)
    return int(r[0]), int(r[1]), r[2], r[3]


def check_panels(d, shot, s, tol):
    """Every camera's panel shows frame n of the group (the same n in every panel, read off
    its pixels) with the right picture, within `tol` per channel."""
    cams = panels_by_camera(s)
    assert sorted(cams) == list(range(CAMS)), s
    numbers = {p["frame"] for _, p in cams.values()}
    assert len(numbers) == 1, f"panels of one group show different frames: {s}"
    n = numbers.pop()
    for c, (pid, p) in cams.items():
        left, top, cw, ch = canvas_origin(d, pid)
        assert (cw, ch) == (W, H), (cw, ch)
        corner = shot.getpixel((left + 8, top + 8))
        exact = tol <= 3
        want_n = n % 256 if c == CAMS - 1 or not exact else n
        assert abs(frame_of_corner(c, corner, exact) - want_n) <= (0 if exact else 1), \
            (c, corner, n)
        for x, y in [(40, 40), (100, 10), (200, 100), (250, 64), (64, 120), (130, 70)]:
            if not exact and near_an_edge(c, n, x, y):
                continue
            want = expected(c, n, x, y)
            got = shot.getpixel((left + x, top + y))
            assert all(abs(a - b) <= tol for a, b in zip(got, want)), \
                f"camera {c}, frame {n}, pixel ({x}, {y}): {got}, want {want}"
    return n


@pytest.mark.parametrize("encoding,tol", [("raw", 2), ("jpeg", 14)])
def test_a_synchronised_group_is_shown_in_lock_step_with_the_right_pixels(
        start_viewer, jobs, browsers, tmp_path, encoding, tol):
    v = start_viewer("--encoding", encoding)
    d = browsers(downloads=tmp_path)
    d.get(v.url)
    wait_page(d, lambda s: s["connected"], "a connection")
    job = vcr(jobs, v, 120, 12)
    s = wait_page(d, lambda s: len(s["panels"]) == CAMS and all(
        (p["frame"] or 0) >= 8 for p in s["panels"].values()), "frame 8 of every camera")
    assert {p["encoding"] for p in s["panels"].values()} == {encoding}
    # While frames arrive, every look at the page finds one frame number in the group.
    seen = set()
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 5 and job.p.poll() is None and time.monotonic() < deadline:
        s = view_state(d)
        numbers = {p["frame"] for p in s["panels"].values()}
        assert len(numbers) == 1, f"panels of one group show different frames: {s}"
        seen |= numbers
    assert len(seen) >= 3, seen
    # Paused, the page keeps its frames: the screenshot's pixels are checked.
    d.find_element(By.ID, "pause").click()
    # A message being drawn when the page paused still lands: wait until none is.
    s = wait_page(d, lambda s: s["paused"] and not s["drawing"], "the page paused")
    shot = screenshot(d)
    shot.save(tmp_path / f"vcr-{encoding}.png")
    n = check_panels(d, shot, s, tol)
    # Save this frame as PNG: camera 0's frame n, at its size, its corner saying n.
    pid = panels_by_camera(s)[0][0]
    d.find_element(By.CSS_SELECTOR, f".panel[data-id='{pid}'] button").click()
    want = tmp_path / f"camera_0-frame-{n}.png"
    deadline = time.monotonic() + 60
    while not want.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert want.exists(), os.listdir(tmp_path)
    saved = Image.open(want).convert("RGB")
    assert saved.size == (W, H)
    exact = tol <= 3
    assert abs(frame_of_corner(0, saved.getpixel((8, 8)), exact) - (n if exact else n % 256)) \
        <= (0 if exact else 1)
    # The job ends: every panel says so; resumed, the page shows the last frame of each.
    assert job.wait() == 0, "".join(job.err)
    d.find_element(By.ID, "pause").click()
    s = wait_page(d, lambda s: all(p["state"] == "stream closed" and p["received"] == 120
                                   and p["frame"] == 119 for p in s["panels"].values()),
                  "stream closed, and the last frames after resuming")
    text = d.find_element(By.ID, "panels").text
    assert text.count("stream closed") == CAMS, text
    assert "received 120" in text


def test_a_heat_field_is_shown_through_its_colour_map(start_viewer, jobs, browsers, tmp_path):
    v = start_viewer("--encoding", "raw")
    d = browsers()
    d.get(v.url)
    wait_page(d, lambda s: s["connected"], "a connection")
    job = jobs("demo", "heat", "--view", "--stream", v.frames, "--n", "96", "--steps", "40",
               "--fps", "10", "--dir", str(tmp_path / "heat"), "--ranks", "4", "--readers", "2")
    s = wait_page(d, lambda s: any((p["frame"] or 0) >= 5 for p in s["panels"].values()),
                  "frame 5 of the heat field")
    d.find_element(By.ID, "pause").click()
    s = wait_page(d, lambda s: s["paused"] and not s["drawing"], "the page paused")
    (pid, p), = s["panels"].items()
    assert p["title"].startswith("heat: step ") and p["colormap"] == "inferno", p
    assert (p["width"], p["height"]) == (96, 96)
    shot = screenshot(d)
    left, top, _, _ = canvas_origin(d, pid)
    inferno = palette("inferno")
    # The edge is held at 0: the map's first colour. The hot square's middle is still
    # near 100 after a few steps: one of the map's last colours.
    assert shot.getpixel((left, top)) == inferno[0]
    mid = shot.getpixel((left + 48, top + 48))
    assert any(all(abs(a - b) <= 2 for a, b in zip(mid, c)) for c in inferno[240:]), mid
    assert colour("inferno", 1.0) == inferno[255] == (252, 255, 164)
    shot.save(tmp_path / "heat.png")
    assert job.wait() == 0, "".join(job.err)


def test_a_slow_or_closing_browser_never_stalls_the_job(start_viewer, jobs, browsers):
    v = start_viewer("--encoding", "jpeg")
    # A page that takes 2 s to draw each message: it skips frames, the job does not wait.
    slow = browsers()
    slow.get(v.url + "?delay=2000")
    wait_page(slow, lambda s: s["connected"], "a connection")
    job = vcr(jobs, v, 120, 0)
    assert job.wait() == 0, "".join(job.err)
    s = wait_page(slow, lambda s: len(s["panels"]) == CAMS and all(
        p["received"] == 120 for p in s["panels"].values()), "every frame received")
    for p in s["panels"].values():
        assert p["shown"] < p["received"], p
    # A page closed in the middle of a stream: the job goes on to its end.
    d = browsers()
    d.get(v.url)
    job = vcr(jobs, v, 150, 20)
    wait_page(d, lambda s: any(p["shown"] >= 2 and p["state"] == "live"
                               for p in s["panels"].values()), "frames of the second job")
    d.quit()
    assert job.wait() == 0, "".join(job.err)
    # The viewer is still there, and has every frame of the second job.
    d = browsers()
    d.get(v.url)
    wait_page(d, lambda s: len(s["panels"]) == CAMS and all(
        p["received"] == 150 and p["state"] == "stream closed" for p in s["panels"].values()),
        "the second job's frames")


def test_garbage_on_both_ports_is_refused_and_the_viewer_goes_on(
        start_viewer, jobs, browsers, tmp_path):
    v = start_viewer()
    host, port = v.addr.rsplit(":", 1)
    http = v.url.split("/")[2].rsplit(":", 1)
    for payload in [os.urandom(4096), b"GET / HTTP/1.1\r\n\r\n", b"SPSH" + b"\xff" * 60]:
        with socket.create_connection((host, int(port)), timeout=30) as c:
            c.sendall(payload)
    for payload in [os.urandom(2048), b"POST / HTTP/1.1\r\n\r\n", b"GET /" + b"a" * 20000,
                    b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", b"GET /frames HTTP/1.1\r\n\r\n"]:
        with socket.create_connection((http[0], int(http[1])), timeout=30) as c:
            c.sendall(payload)
            try:
                answer = c.recv(100)
            except (ConnectionResetError, socket.timeout):
                answer = b""
            assert answer == b"" or re.match(rb"HTTP/1.1 (400|404|405|408|426|431) ", answer), answer
    # A stream of something that is no frame: named on its panel.
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(5000))
    send = Proc([SPOOLS, "send", str(junk), v.frames])
    assert send.wait() == 0, "".join(send.err)
    d = browsers()
    d.get(v.url)
    wait_page(d, lambda s: any("not a frame" in p["state"] for p in s["panels"].values()),
              "the stream that is no frame")
    # And frames still come through.
    job = vcr(jobs, v, 20, 0)
    assert job.wait() == 0, "".join(job.err)
    wait_page(d, lambda s: sum(p["received"] == 20 for p in s["panels"].values()) == CAMS,
              "the job's frames after the garbage")
    page = urllib.request.urlopen(v.url, timeout=30).read().decode()
    # Self-contained: nothing fetched from anywhere else.
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", page)
    assert "<script src" not in page


def test_beyond_loopback_the_page_needs_its_token(start_viewer):
    refused = Proc([SPOOLS, "view", "tcp:127.0.0.1:0", "--http", "0.0.0.0:0"])
    assert refused.wait() == 1
    assert "not a loopback address" in "".join(refused.err)
    v = start_viewer("--allow-remote", http="0.0.0.0:0")
    m = re.match(r"http://0\.0\.0\.0:(\d+)/\?token=([0-9a-f]{32})$", v.url)
    assert m, v.url
    base = f"http://127.0.0.1:{m.group(1)}/"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base, timeout=30)
    assert e.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "?token=" + "0" * 32, timeout=30)
    assert e.value.code == 403
    page = urllib.request.urlopen(base + "?token=" + m.group(2), timeout=30).read()
    assert b"Spools live view" in page


# ---- frames from the Python and C interfaces ---------------------------------------------

REPO = Path(__file__).resolve().parents[4]
# Both send N frames of 64x96 from 3 ranks: a grey stream, and a lock-step group of an RGB
# image (rows cyclic) and an f32 field (columns cyclic, viridis from 0 to 10).
PY_FRAMES = REPO / "crates/spools-py/tests/progs/stream_frames.py"
C_FRAMES = REPO / "crates/spools-c/tests/frames.c"
FH, FW = 64, 96


def frame_colour(kind, n, x, y):
    """What the page shows at (x, y) of frame n of stream_frames.py's and frames.c's
    panels."""
    if kind == "grey":
        g = (y * FW + x + 7 * n) % 256
        return (g, g, g)
    if kind == "rgb":
        k = (y * FW + x) * 3
        return tuple(((k + c) * 5 + 11 * n) % 256 for c in range(3))
    v = f32(n + 0.5 * y + 0.25 * x)  # lo 0, hi 10 (docs/view.md, "Colour maps")
    return palette("viridis")[min(max(round_half_away(v * (255 / 10.0)), 0), 255)]


def c_frames_program(tmp_path):
    """frames.c compiled against the installed library, as the C tests build it
    (scripts/test-view.sh installs it into target/c-prefix and sets PKG_CONFIG_PATH)."""
    r = subprocess.run(["pkg-config", "--cflags", "--libs", "spools"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.fail("no spools.pc for pkg-config: run through scripts/test-view.sh, which "
                    "installs the C interface into target/c-prefix: " + r.stderr)
    exe = tmp_path / "frames"
    subprocess.run(["cc", "-std=c99", "-O1", str(C_FRAMES), *shlex.split(r.stdout), "-o",
                    str(exe)], check=True, timeout=300)
    return exe


@pytest.mark.parametrize("lang", ["python", "c"])
def test_frames_from_a_python_or_c_job(start_viewer, jobs, browsers, tmp_path, lang):
    v = start_viewer("--encoding", "raw")
    d = browsers()
    d.get(v.url)
    wait_page(d, lambda s: s["connected"], "a connection")
    n = 24
    if lang == "python":
        job = jobs("run", "-n", "3", "--", sys.executable, str(PY_FRAMES), v.frames, "view",
                   str(n))
        prefix = "py "
    else:
        job = jobs("run", "-n", "3", "--", str(c_frames_program(tmp_path)), "view", v.frames,
                   str(n))
        prefix = "c "
    assert job.wait() == 0, "".join(job.err)
    s = wait_page(d, lambda s: len(s["panels"]) == 3 and all(
        p["received"] == n and p["frame"] == n - 1 and p["state"] == "stream closed"
        for p in s["panels"].values()), f"the {lang} job's {n} frames of 3 streams")
    d.find_element(By.ID, "pause").click()
    s = wait_page(d, lambda s: s["paused"] and not s["drawing"], "the page paused")
    panels = {p["title"]: (pid, p) for pid, p in s["panels"].items()}
    assert sorted(panels) == sorted(prefix + k for k in ("grey", "rgb", "field")), s
    # The group's two streams in one group, the grey one in none; the field's map.
    assert panels[prefix + "rgb"][1]["group"] == panels[prefix + "field"][1]["group"] == 1
    assert panels[prefix + "grey"][1]["group"] == 0
    assert panels[prefix + "field"][1]["colormap"] == "viridis", panels
    shot = screenshot(d)
    shot.save(tmp_path / f"frames-{lang}.png")
    for kind in ("grey", "rgb", "field"):
        pid, p = panels[prefix + kind]
        assert (p["width"], p["height"]) == (FW, FH), p
        left, top, cw, ch = canvas_origin(d, pid)
        assert (cw, ch) == (FW, FH), (kind, cw, ch)
        for x, y in [(0, 0), (5, 3), (40, 20), (95, 63), (70, 50), (13, 61), (90, 7)]:
            want = frame_colour(kind, n - 1, x, y)
            got = shot.getpixel((left + x, top + y))
            assert all(abs(a - b) <= 2 for a, b in zip(got, want)), \
                f"{lang} {kind}, frame {n - 1}, pixel ({x}, {y}): {got}, want {want}"
