#!/usr/bin/env bash
# The README's test command: a fresh venv with trainops and its dev extras, then pytest.
# Needs the system packages of scripts/install-test-deps.sh. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_TEST_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# the example project too: the training, checkpoint and resume tests train it for real
"$venv/bin/python" -m pip install --quiet -e '.[dev]' -e ./examples/tiny-llm
set +e
"$venv/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "run-tests.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$rc"
