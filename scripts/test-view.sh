#!/usr/bin/env bash
# The live viewer in a real browser: `spools view` and `spools demo vcr` / `demo heat`
# jobs, and a Python job and a C job sending frames through their interfaces (the `spools`
# package built into target/py-venv with maturin, as scripts/test-python.sh does; libspools
# installed into target/c-prefix, as scripts/test-c.sh does), pages opened in headless
# Chromium (Debian's chromium and chromium-driver, installed when missing) through Selenium
# (PyPI, in target/py-venv); screenshots and pixels checked.
# scripts/test.sh runs it. With SPOOLS_VIEW_BROWSER=firefox the same tests run in headless
# Firefox instead (Debian's firefox-esr, and geckodriver built from crates.io into
# target/tools; both installed when missing). That run is not part of the test command.
#
#   bash scripts/test-view.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/py-venv.sh
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "pytest>=7" "selenium>=4.20,<5" "pillow>=10" "maturin>=1.7,<2" "numpy>=1.21"
if [ "${SPOOLS_VIEW_BROWSER:-chromium}" = firefox ]; then
  if [ ! -x /usr/bin/firefox-esr ]; then
    SUDO=""; if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq firefox-esr >/dev/null
  fi
  if [ ! -x target/tools/bin/geckodriver ]; then
    cargo install --quiet --locked --root target/tools geckodriver
  fi
else
  bash scripts/install-chromium.sh
fi
cargo build --locked -p spools-cli
# The Python job's package and the C job's library.
VIRTUAL_ENV="$(cd "$venv" && pwd)" PATH="$(cd "$venv" && pwd)/bin:$PATH" \
  "$venv/bin/maturin" develop --quiet --locked -m crates/spools-py/Cargo.toml
prefix="$(pwd)/target/c-prefix"
make --no-print-directory -C crates/spools-c install PREFIX="$prefix" PROFILE=debug >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
SPOOLS_BIN="$(pwd)/target/debug/spools" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  crates/spools-view/tests/py "$@"
