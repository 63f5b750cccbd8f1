#!/usr/bin/env bash
# The live viewer in a real browser: `spools view` and `spools demo vcr` / `demo heat`
# jobs, pages opened in headless Chromium (Debian's chromium and chromium-driver, installed
# when missing) through Selenium (PyPI, in target/py-venv); screenshots and pixels checked.
# scripts/test.sh runs it.
#
#   bash scripts/test-view.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${SPOOLS_PY_VENV:-target/py-venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "pytest>=7" "selenium>=4.20,<5" "pillow>=10"
bash scripts/install-chromium.sh
cargo build --locked -p spools-cli
SPOOLS_BIN="$(pwd)/target/debug/spools" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  crates/spools-view/tests/py "$@"
