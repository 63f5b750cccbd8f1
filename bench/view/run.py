#!/usr/bin/env python3
"""The live viewer's benchmark: frames per second delivered to a page in headless Chromium,
and what a viewer and a page cost the job that streams.

usage: bench/view/run.py [--runs N] [--frames N] [--ranks N] [--only fps,slowdown] [--out DIR]

Builds `spools` (cargo build --release), installs Debian's chromium and chromium-driver
when missing (scripts/install-chromium.sh) and Selenium into target/bench-venv, then, N
times (default 3), alternating the cases within each run:

  fps       `spools demo vcr --rgb-only --layout rows --size 1920x1080 --fps 0` (as fast as
            it goes; every frame in bands of rows, `block,*,*`) with
            1 and 4 cameras (4: one lock-step group) streaming to `spools view`, a page
            open in a 1920x1080 headless Chromium window; frames as JPEG and as raw RGBA,
            at full size (the page's "fit" off) and fitted to the page's panels (the
            viewer decimates each frame to the panel's width). Reported: frames/s per
            stream the page drew (shown), and frames/s the job sent (received).
  slowdown  the job with 4 cameras (a) at 640x360, paced at 30 frames/s as a camera or a
            simulation producing frames at its own rate would be (10 s of frames), and (b)
            at 1920x1080 unpaced (as fast as the stream takes them): without a stream
            (--no-stream), streaming to a viewer without a page, with a page that keeps
            up, and with a page that cannot (it takes 1 s to draw each message, so the
            viewer drops frames for it). Reported: the job's seconds, and the ratio of each
            to the job without a stream and to the viewer without a page.

Writes DIR/results.json (every sample) and DIR/summary.md (medians), default
bench/results/view. The slowdown cases run in an order that turns from run to run.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPOOLS = os.path.join(ROOT, "target", "release", "spools")
VENV = os.path.join(ROOT, "target", "bench-venv")


def setup():
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "spools-cli"], cwd=ROOT,
                   check=True)
    subprocess.run(["bash", "scripts/install-chromium.sh"], cwd=ROOT, check=True)
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "selenium>=4.20,<5"], check=True)
    if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        os.execv(py, [py, *sys.argv])


class Viewer:
    def __init__(self, encoding):
        self.p = subprocess.Popen([SPOOLS, "view", "tcp:127.0.0.1:0", "--http", "127.0.0.1:0",
                                   "--encoding", encoding], stderr=subprocess.PIPE, text=True)
        self.frames = re.search(r"frames to (tcp:\S+)", self.p.stderr.readline()).group(1)
        self.url = re.search(r"open (http://\S+)", self.p.stderr.readline()).group(1)

    def stop(self):
        self.p.kill()
        self.p.wait()


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1920,1080", "--force-device-scale-factor=1",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run", "--disable-background-timer-throttling",
              "--disable-renderer-backgrounding"]:
        o.add_argument(a)
    d = webdriver.Chrome(options=o, service=Service("/usr/bin/chromedriver"))
    d.set_script_timeout(60)
    return d


def state(d):
    return json.loads(d.execute_script("return JSON.stringify(window.spoolsView)"))


def vcr(dest, cams, frames, fps, ranks, size="1920x1080"):
    args = [SPOOLS, "demo", "vcr", "--rgb-only", "--layout", "rows", "--cameras", str(cams), "--frames",
            str(frames), "--fps", str(fps), "--size", size, "--ranks", str(ranks),
            "--links", "4"]
    args += ["--stream", dest] if dest else ["--no-stream"]
    t = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t
    if out.returncode != 0:
        raise RuntimeError(f"{args}: {out.stderr}")
    secs = float(re.search(r" in ([0-9.]+) s ", out.stdout).group(1))
    return secs, wall


def fps_case(cams, encoding, fit, frames, ranks):
    v = Viewer(encoding)
    d = browser()
    try:
        d.get(v.url + ("" if fit else "?fit=0"))
        deadline = time.monotonic() + 60
        while not state(d)["connected"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the page did not connect")
            time.sleep(0.05)
        secs, _ = vcr(v.frames, cams, frames, 0, ranks)
        # The page drew its last frames shortly after the job ended: count what it drew.
        deadline = time.monotonic() + 30
        while True:
            s = state(d)
            if s["panels"] and all(p["received"] == frames for p in s["panels"].values()) \
                    and not s["drawing"]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the page never had every frame: {s}")
            time.sleep(0.05)
        shown = [p["shown"] for p in s["panels"].values()]
        sizes = sorted({(p.get("iw"), p.get("ih")) for p in s["panels"].values()})
        return {"cameras": cams, "encoding": encoding, "fit": fit, "job_s": secs,
                "shown": shown, "sent_fps": frames / secs,
                "shown_fps": statistics.mean(shown) / secs, "drawn_size": sizes}
    finally:
        d.quit()
        v.stop()


def slow_case(kind, size, fps, frames, ranks):
    if kind == "no stream":
        return vcr(None, 4, frames, fps, ranks, size)[0]
    v = Viewer("raw")
    d = None
    try:
        if kind != "viewer, no page":
            d = browser()
            d.get(v.url + ("?delay=1000" if kind == "viewer, slow page" else ""))
            deadline = time.monotonic() + 60
            while not state(d)["connected"]:
                if time.monotonic() > deadline:
                    raise RuntimeError("the page did not connect")
                time.sleep(0.05)
        secs = vcr(v.frames, 4, frames, fps, ranks, size)[0]
        if d is not None and kind == "viewer, slow page":
            s = state(d)
            shown = sum(p["shown"] for p in s["panels"].values())
            if shown >= 4 * frames:
                raise RuntimeError("the slow page drew every frame: it kept up")
        return secs
    finally:
        if d is not None:
            d.quit()
        v.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--only", default="fps,slowdown")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "view"))
    a = ap.parse_args()
    only = a.only.split(",")
    setup()
    os.makedirs(a.out, exist_ok=True)
    fps, slow = [], []
    kinds = ["no stream", "viewer, no page", "viewer, page", "viewer, slow page"]
    paces = [("640x360", 30, 300), ("1920x1080", 0, a.frames)]
    for run in range(a.runs):
        for cams in ((1, 4) if "fps" in only else ()):
            for encoding in ("jpeg", "raw"):
                for fit in (True, False):
                    r = fps_case(cams, encoding, fit, a.frames, a.ranks)
                    r["run"] = run
                    print(json.dumps(r), flush=True)
                    fps.append(r)
        for size, pace, frames in (paces if "slowdown" in only else ()):
            # The order of the cases turns from run to run, so that none always follows
            # the same one (a browser still closing, a warm cache).
            for kind in kinds[run % len(kinds):] + kinds[:run % len(kinds)]:
                secs = slow_case(kind, size, pace, frames, a.ranks)
                r = {"run": run, "size": size, "fps": pace, "frames": frames, "kind": kind,
                     "job_s": secs}
                print(json.dumps(r), flush=True)
                slow.append(r)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"commit": rev, "frames": a.frames, "ranks": a.ranks, "fps": fps,
                   "slowdown": slow}, f, indent=1)
    med = statistics.median
    lines = [f"# Live view: frames/s into a page, and the job's slowdown (commit {rev})", "",
             f"`bench/view/run.py --runs {a.runs} --frames {a.frames} --ranks {a.ranks}`: "
             f"`spools demo vcr --rgb-only --layout rows` from {a.ranks} ranks, 4 links, "
             "headless Chromium 1920x1080; medians of "
             f"{a.runs} runs.", ""]
    if fps:
        lines += ["| cameras | frames as | size drawn | job sent (frames/s per stream) | "
                  "page drew (frames/s per stream) |", "|---|---|---|---|---|"]
        for cams in (1, 4):
            for encoding in ("jpeg", "raw"):
                for fit in (True, False):
                    rs = [r for r in fps if (r["cameras"], r["encoding"], r["fit"]) ==
                          (cams, encoding, fit)]
                    size = "x".join(map(str, rs[-1]["drawn_size"][0]))
                    lines.append(f"| {cams} | {encoding} | {size} ({'fitted' if fit else 'full'}) "
                                 f"| {med(r['sent_fps'] for r in rs):.1f} | "
                                 f"{med(r['shown_fps'] for r in rs):.1f} |")
        lines.append("")
    if slow:
        lines += ["| 4 cameras | job | seconds | vs no stream | vs the viewer without a page |",
                  "|---|---|---|---|---|"]
        for size, pace, frames in paces:
            def t(kind):
                return med(r["job_s"] for r in slow
                           if (r["size"], r["fps"], r["kind"]) == (size, pace, kind))
            for kind in kinds:
                lines.append(f"| {size}, {frames} frames, {f'paced at {pace}/s' if pace else 'unpaced'} "
                             f"| {kind} | {t(kind):.2f} | {t(kind) / t('no stream'):.3f} | "
                             f"{t(kind) / t('viewer, no page'):.3f} |")
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
