#!/bin/sh
# Runs a test script with the project's Python environment ($TUPE_VENV/bin/python, made by
# `./run.sh venv`, which `./run.sh test` exports). Without it the test fails with this message:
# it never skips.
if [ -z "${TUPE_VENV:-}" ] || [ ! -x "$TUPE_VENV/bin/python" ]; then
    echo "venv_python.sh: TUPE_VENV ('${TUPE_VENV:-}') is not the project's Python environment;" \
        "run ./run.sh test, or export TUPE_VENV=\"\$(./run.sh venv)\" before ctest" >&2
    exit 1
fi
exec "$TUPE_VENV/bin/python" "$@"
