# Sourced by the test scripts: the Python virtual environment they share,
# $SPOOLS_PY_VENV (default target/py-venv), made with $PYTHON (default python3) when
# missing. Sets `venv`.
venv="${SPOOLS_PY_VENV:-target/py-venv}"
if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
