#!/usr/bin/env bash
# The Python interface's tests: builds the `spools` package (crates/spools-py) into the
# virtual environment target/py-venv with maturin, then runs its pytest suite, whose
# tests launch real jobs with the workspace's `spools` binary. scripts/test.sh runs it.
#
#   bash scripts/test-python.sh [pytest arguments]
#
# SPOOLS_PY_VENV picks another virtual environment; SPOOLS_PY_RELEASE=1 builds the
# package optimised (the benchmarks do).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/py-venv.sh
# What the package and its tests need, from PyPI (pinned below a major version).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin>=1.7,<2" "numpy>=1.21" "pytest>=7"

bash scripts/install-hdf5.sh
cargo build --locked -p spools-cli
profile=()
if [ "${SPOOLS_PY_RELEASE:-0}" = 1 ]; then profile=(--release); fi
VIRTUAL_ENV="$(cd "$venv" && pwd)" PATH="$(cd "$venv" && pwd)/bin:$PATH" \
  "$venv/bin/maturin" develop --quiet --locked "${profile[@]}" -m crates/spools-py/Cargo.toml

SPOOLS_BIN="$(pwd)/target/debug/spools" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  crates/spools-py/tests "$@"
