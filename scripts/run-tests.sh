#!/usr/bin/env bash
# The README's test command: the development venv (scripts/dev-venv.sh), then pytest.
# Needs the system packages of scripts/install-test-deps.sh. Extra arguments go to pytest.
#
# The suite runs in TRAINOPS_TEST_WORKERS parallel pytest-xdist workers (default 3; the tests
# wait on real services more than they compute, so 3 keep two cores busy), a test file to a
# worker, heaviest first (tests/conftest.py). The planted-secrets scan (tests/leaks, marked
# after_all) reads what every worker wrote, so it runs after them, on their temporary root
# (one per clone, under $TMPDIR; kept until the next run, for a look at what a failed test left).
# TRAINOPS_TEST_WORKERS=0 runs everything in this one process, the scan last.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(bash scripts/dev-venv.sh)"
workers="${TRAINOPS_TEST_WORKERS:-3}"
case "$workers" in
    '' | *[!0-9]*)
        echo "run-tests.sh: TRAINOPS_TEST_WORKERS=$workers is not a number of workers (0 runs in one process)" >&2
        exit 2
        ;;
esac
root="${TMPDIR:-/tmp}/trainops-tests-$(id -u)-$(printf '%s' "$PWD" | cksum | cut -d' ' -f1)"

pytest_rc() {  # pytest exits 5 when it collected nothing: that is a failure
    local rc=0
    "$venv/bin/python" -m pytest "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "run-tests.sh: pytest collected no tests; that is a failure" >&2
        return 1
    fi
    return "$rc"
}

if [ "$workers" -eq 0 ]; then
    pytest_rc "$@"
    exit
fi
rc=0
pytest_rc -n "$workers" --dist loadfile --no-loadscope-reorder --basetemp "$root" "$@" || rc=$?
scan=0
TRAINOPS_LEAKS_ROOT="$root" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/leaks || scan=$?
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi
exit "$scan"
