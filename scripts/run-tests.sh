#!/usr/bin/env bash
# The README's test command: the development venv (scripts/dev-venv.sh), then pytest.
# Needs the system packages of scripts/install-test-deps.sh. Extra arguments go to pytest.
#
# The suite runs in TRAINOPS_TEST_WORKERS parallel pytest-xdist workers (default 3; the tests
# wait on real services more than they compute, so 3 keep two cores busy), a test file to a
# worker, heaviest first (tests/conftest.py). Tests marked `alone` compare the pace of processes
# on this machine, so they run after the workers, in one process. The planted-secrets scan
# (tests/leaks, marked after_all) reads what every pass wrote, so it runs last, on their
# temporary root (one per clone, under $TMPDIR; kept until the next run, for a look at what a
# failed test left). TRAINOPS_TEST_WORKERS=0 runs everything in this one process, the scan last.
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

pytest=("$venv/bin/python" -m pytest)  # exit 5: it collected (or kept) no tests
nothing() {
    echo "run-tests.sh: pytest collected no tests; that is a failure" >&2
    exit 1
}

if [ "$workers" -eq 0 ]; then
    rc=0
    "${pytest[@]}" "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then nothing; fi
    exit "$rc"
fi
# a selection may hold no `alone` test, or only such tests: one of the two passes may keep
# none (exit 5), not both
rc=0
"${pytest[@]}" -n "$workers" --dist loadfile --no-loadscope-reorder --basetemp "$root" "$@" || rc=$?
alone=0
TRAINOPS_TESTS_ALONE=1 "${pytest[@]}" --basetemp "$root/alone" "$@" || alone=$?
scan=0
TRAINOPS_LEAKS_ROOT="$root" "${pytest[@]}" -q -p no:cacheprovider tests/leaks || scan=$?
if [ "$rc" -eq 5 ] && [ "$alone" -eq 5 ]; then nothing; fi
for code in "$rc" "$alone" "$scan"; do
    if [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then exit "$code"; fi
done
if [ "$scan" -ne 0 ]; then exit 1; fi  # the scan collected nothing: tests/leaks is gone
