#!/usr/bin/env bash
# The README's test command: the development venv (scripts/dev-venv.sh), then pytest.
# Needs the system packages of scripts/install-test-deps.sh. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(bash scripts/dev-venv.sh)"
set +e
"$venv/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "run-tests.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$rc"
