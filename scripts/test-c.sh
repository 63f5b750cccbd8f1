#!/usr/bin/env bash
# The C interface's tests: installs libspools, spools.h and spools.pc into target/c-prefix
# (the debug build, as `make -C crates/spools-c install` does for users), checks that the
# header compiles as strict C99 and as C++, then runs the pytest suite of
# crates/spools-c/tests, which compiles the C programs there with cc through pkg-config
# and runs them under `spools run`. scripts/test.sh runs it after test-python.sh (whose
# virtual environment, target/py-venv, has numpy and pytest).
#
#   bash scripts/test-c.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-c-tools.sh

source scripts/py-venv.sh
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "numpy>=1.21" "pytest>=7"

prefix="$(pwd)/target/c-prefix"
bash scripts/install-hdf5.sh
cargo build --locked -p spools-cli
make --no-print-directory -C crates/spools-c install PREFIX="$prefix" PROFILE=debug >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

echo "== spools.h as C99 (-Wall -Wextra -Werror -pedantic) and as C++"
hdr_test="$(mktemp -d)"
trap 'rm -rf "$hdr_test"' EXIT
printf '#include <spools.h>\nint main(void) { return spools_check_version(SPOOLS_VERSION_MAJOR, SPOOLS_VERSION_MINOR); }\n' > "$hdr_test/h.c"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror -pedantic $(pkg-config --cflags spools) -fsyntax-only "$hdr_test/h.c"
# shellcheck disable=SC2046
g++ -x c++ -std=c++11 -Wall -Wextra -Werror -pedantic $(pkg-config --cflags spools) -fsyntax-only "$hdr_test/h.c"

SPOOLS_BIN="$(pwd)/target/debug/spools" SPOOLS_C_PREFIX="$prefix" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/spools-c/tests "$@"
