#!/usr/bin/env bash
# Installs iperf3 from Debian's packages if it is missing: the physical limit the stream
# benchmarks (`spools bench stream`, scripts/bench-stream.sh) are compared against.
set -euo pipefail
if command -v iperf3 >/dev/null; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "== installing iperf3 from Debian"
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq iperf3 >/dev/null
command -v iperf3 >/dev/null
