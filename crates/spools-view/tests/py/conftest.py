"""Fixtures of the live viewer's browser tests: a `spools view` process, headless Chromium
driven by Selenium, jobs that stream frames, and what the page shows."""

import json
import os
import queue
import re
import struct
import subprocess
import threading
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

SPOOLS = os.environ.get("SPOOLS_BIN", "target/debug/spools")
# Every wait is bounded: a job, a page or a process that does not get there fails the test.
TIMEOUT = 180

# The colour maps' stops (spools_proto::framebuffer::ColorMap::stops).
STOPS = {
    "grey": [(0, 0, 0), (255, 255, 255)],
    "inferno": [(0, 0, 4), (40, 11, 84), (101, 21, 110), (159, 42, 99), (212, 72, 66),
                (245, 125, 21), (250, 193, 39), (252, 255, 164)],
    "viridis": [(68, 1, 84), (70, 50, 127), (54, 92, 141), (39, 127, 142), (31, 161, 135),
                (74, 194, 109), (159, 218, 58), (253, 231, 37)],
}


def round_half_away(x):
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def colour(name, t):
    """The colour at t in [0, 1] of a map: its stops linearly interpolated."""
    stops = STOPS[name]
    x = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(x), len(stops) - 2)
    f = x - i
    a, b = stops[i], stops[i + 1]
    return tuple(round_half_away(a[k] + (b[k] - a[k]) * f) for k in range(3))


def palette(name):
    """The viewer's 256 colours of a map."""
    return [colour(name, i / 255.0) for i in range(256)]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class Proc:
    """A process whose stderr lines are collected, killed at the end of the test."""

    def __init__(self, args, **kw):
        self.args = args
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, **kw)
        self.lines = queue.Queue()
        self.out = []
        self.err = []
        self.readers = []
        for stream, keep in ((self.p.stderr, self.err), (self.p.stdout, self.out)):
            t = threading.Thread(target=self._read, args=(stream, keep), daemon=True)
            t.start()
            self.readers.append(t)

    def _read(self, stream, keep):
        for line in stream:
            keep.append(line)
            self.lines.put(line)

    def wait_line(self, pattern, timeout=60):
        """The first line (of either stream) matching `pattern`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.args}: no line like {pattern!r}; stderr: {''.join(self.err)}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            m = re.search(pattern, line)
            if m:
                return m

    def wait(self, timeout=TIMEOUT):
        """The exit status, once the process ended and its output was read to the end (the
        readers finish at end of file: an exited process's last lines are in `err` and
        `out`, not still in the pipe)."""
        try:
            code = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.args} did not end within {timeout} s")
        for t in self.readers:
            t.join(timeout=timeout)
        return code

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=30)


class Viewer:
    def __init__(self, *extra, http="127.0.0.1:0"):
        self.proc = Proc([SPOOLS, "view", "tcp:127.0.0.1:0", "--http", http, *extra])
        self.frames = "tcp:" + self.proc.wait_line(r"frames to tcp:(\S+)").group(1)
        self.url = self.proc.wait_line(r"open (http://\S+)").group(1)
        self.addr = self.frames[len("tcp:"):]


@pytest.fixture
def start_viewer():
    made = []

    def start(*extra, **kw):
        v = Viewer(*extra, **kw)
        made.append(v)
        return v

    yield start
    for v in made:
        v.proc.kill()


@pytest.fixture
def jobs():
    """Starts jobs (`spools ...` arguments); each is waited for, bounded, at the end."""
    made = []

    def start(*args):
        j = Proc([SPOOLS, *args])
        made.append(j)
        return j

    yield start
    for j in made:
        j.kill()


def vcr(jobs, viewer, frames, fps, size="256x128", *extra):
    return jobs("demo", "vcr", "--stream", viewer.frames, "--frames", str(frames),
                "--fps", str(fps), "--size", size, "--links", "3", *extra)


# The browser the pages open in: chromium (Debian's, the default) or firefox (Debian's
# firefox-esr with geckodriver, SPOOLS_VIEW_BROWSER=firefox; scripts/test-view.sh installs
# them when asked).
BROWSER = os.environ.get("SPOOLS_VIEW_BROWSER", "chromium")


def chromium(profile, downloads):
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--force-device-scale-factor=1",
              "--force-color-profile=srgb", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run",
              f"--user-data-dir={profile}"]:
        o.add_argument(a)
    if downloads:
        o.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                            "download.prompt_for_download": False})
    return webdriver.Chrome(options=o, service=Service("/usr/bin/chromedriver"))


def firefox(profile, downloads):
    from selenium.webdriver.firefox.service import Service as GeckoService
    o = webdriver.FirefoxOptions()
    o.binary_location = "/usr/bin/firefox-esr"
    for a in ["-headless", "--width=1400", "--height=1000"]:
        o.add_argument(a)
    o.set_preference("layout.css.devPixelsPerPx", "1.0")
    o.set_preference("gfx.color_management.mode", 0)
    if downloads:
        o.set_preference("browser.download.folderList", 2)
        o.set_preference("browser.download.dir", str(downloads))
        o.set_preference("browser.helperApps.neverAsk.saveToDisk", "image/png")
    driver = os.environ.get("SPOOLS_GECKODRIVER", "target/tools/bin/geckodriver")
    return webdriver.Firefox(options=o, service=GeckoService(driver))


@pytest.fixture
def browsers(tmp_path):
    """Opens headless browser windows (1400x1000, device pixel ratio 1, sRGB); each is quit
    at the end of the test (or by the test)."""
    made = []

    def open_browser(downloads=None):
        profile = tmp_path / f"browser-{len(made)}"
        d = (firefox if BROWSER == "firefox" else chromium)(profile, downloads)
        d.set_page_load_timeout(60)
        d.set_script_timeout(60)
        made.append(d)
        return d

    yield open_browser
    for d in made:
        try:
            d.quit()
        except Exception:  # already quit by the test
            pass


def view_state(d):
    """What the page shows: window.spoolsView."""
    return json.loads(d.execute_script("return JSON.stringify(window.spoolsView)"))


def wait_page(d, pred, what, timeout=TIMEOUT):
    """Polls the page's state until pred(state) holds; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    s = None
    while time.monotonic() < deadline:
        s = view_state(d)
        if pred(s):
            return s
        time.sleep(0.05)
    raise AssertionError(f"the page never showed {what}; last state: {s}")
