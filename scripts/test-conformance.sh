#!/usr/bin/env bash
# The conformance clients: programs in Python (standard library plus the `crc32c` module),
# written from the specifications in docs/ alone, never from the Rust code, run against the
# real `spools send`, `spools recv`, a job's streams and `spools view`, as a third party's
# implementation would meet them. The test vectors in the specifications are checked here
# too. scripts/test.sh runs it.
#
#   bash scripts/test-conformance.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/py-venv.sh
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "pytest>=7" "crc32c>=2.3"

cargo build --locked -p spools-cli
SPOOLS_BIN="$(pwd)/target/debug/spools" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  scripts/conformance "$@"
