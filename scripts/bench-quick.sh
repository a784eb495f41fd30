#!/usr/bin/env bash
# Every benchmark in bench/ in its quick mode (seconds, small data): a change that breaks a
# benchmark fails CI. Uses the venv scripts/run-tests.sh made (trainops + the dev extras);
# needs the system packages of scripts/install-test-deps.sh. Writes no results.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_TEST_VENV:-.venv}"
[ -x "$venv/bin/python" ] || { echo "bench-quick.sh: no $venv: run scripts/run-tests.sh first" >&2; exit 1; }
export PATH="$PWD/$venv/bin:$PATH"
status=0
for script in bench/*.py; do
    echo "== $script --quick"
    if ! "$venv/bin/python" "$script" --quick; then
        echo "bench-quick.sh: $script --quick failed" >&2
        status=1
    fi
done
exit "$status"
