#!/usr/bin/env bash
# Installs Debian's Chromium and ChromeDriver (packages chromium and chromium-driver:
# /usr/bin/chromium, /usr/bin/chromedriver) when missing. The live viewer's browser tests
# (scripts/test-view.sh) and its benchmark (bench/view/run.py) drive them headless.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "== installing chromium and chromium-driver from Debian"
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium chromium-driver >/dev/null
/usr/bin/chromedriver --version
