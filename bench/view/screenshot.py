#!/usr/bin/env python3
"""The README's screenshot of the live view: `spools demo heat --view` mid-run, its page in
headless Chromium (a 1100x1100 window), saved once the page shows step 600 of 3000.

usage: bench/view/screenshot.py [--out docs/view-heat.png]

Needs what bench/view/run.py sets up (a release build, Chromium, Selenium in
target/bench-venv); run that once first, or let this script do the same setup.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the benchmark's setup and browser)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(run.ROOT, "docs", "view-heat.png"))
    ap.add_argument("--step", type=int, default=600)
    a = ap.parse_args()
    run.setup()
    demo = subprocess.Popen([run.SPOOLS, "demo", "heat", "--view", "--http", "127.0.0.1:0",
                             "--view-for", "0", "--dir", os.path.join(run.ROOT, "target", "heat-view")],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        url = re.search(r"watch it at (\S+)", demo.stderr.readline()).group(1)
        d = run.browser()
        d.set_window_size(1100, 1100)
        d.get(url)
        deadline = time.monotonic() + 300
        while True:
            s = json.loads(d.execute_script("return JSON.stringify(window.spoolsView)"))
            titles = [p["title"] for p in s["panels"].values()]
            if titles and titles[0] and int(titles[0].split()[-1]) >= a.step and not s["drawing"]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the page never reached step {a.step}: {s}")
            time.sleep(0.05)
        button = d.find_element("id", "pause")
        button.click()
        while button.text != "Resume" or json.loads(
                d.execute_script("return JSON.stringify(window.spoolsView)"))["drawing"]:
            time.sleep(0.05)
        d.save_screenshot(a.out)
        print(f"{a.out}: {titles[0]}")
        d.quit()
    finally:
        demo.kill()
        demo.wait()


if __name__ == "__main__":
    main()
