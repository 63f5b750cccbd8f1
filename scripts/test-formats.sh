#!/usr/bin/env bash
# The file-format tests against the ecosystem's own readers and writers: zarr-python
# (Zarr v3), h5py (HDF5) and numpy (.npy), installed from PyPI into the virtual environment
# target/py-venv, talk to Spools jobs run with the workspace's `spools` binary.
# scripts/test.sh runs it.
#
#   bash scripts/test-formats.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/py-venv.sh
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "numpy>=1.24" "pytest>=7" "zarr>=3,<4" "h5py>=3" "tensorstore>=0.1.60"

bash scripts/install-hdf5.sh
cargo build --locked -p spools-cli
# The README's Zarr example runs on the spools package (scripts/test-python.sh, which
# scripts/test.sh runs first, builds it into the same environment).
if ! "$venv/bin/python" -c "import spools" 2>/dev/null; then
  VIRTUAL_ENV="$(cd "$venv" && pwd)" PATH="$(cd "$venv" && pwd)/bin:$PATH" \
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.7,<2"
  VIRTUAL_ENV="$(cd "$venv" && pwd)" PATH="$(cd "$venv" && pwd)/bin:$PATH" \
    "$venv/bin/maturin" develop --quiet --locked -m crates/spools-py/Cargo.toml
fi
SPOOLS_BIN="$(pwd)/target/debug/spools" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  crates/spools-io/tests/py "$@"
