#!/usr/bin/env bash
# Installs what the multi-host tests need from Debian's packages when missing: `ip`
# (iproute2: network namespaces, veth pairs, bridges, `ip link set ... down`) and `nft`
# (nftables: packet loss with `numgen random mod 100 < N drop` inside a namespace). The
# tests (crates/spools-cli/tests/hosts.rs, net_faults.rs) run as root and skip, saying
# why, when they cannot make namespaces.
set -euo pipefail
missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v nft >/dev/null || missing+=(nftables)
if [ "${#missing[@]}" = 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "== installing ${missing[*]} from Debian"
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
command -v ip >/dev/null && command -v nft >/dev/null
