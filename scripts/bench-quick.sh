#!/usr/bin/env bash
# Every benchmark in bench/ in its quick mode (seconds, small data): a change that breaks a
# benchmark fails CI. Uses the development venv (scripts/dev-venv.sh); needs the system
# packages of scripts/install-test-deps.sh. Writes none of the results the docs are made from
# (a few quick modes leave scratch output in bench/results/, which git ignores).
set -euo pipefail
cd "$(dirname "$0")/.."
# the development venv: the benchmarks import trainops_testing, which a user's install (such
# as scripts/main-job.sh's, run just before this in CI) does not carry
venv="$(bash scripts/dev-venv.sh)"
export PATH="$venv/bin:$PATH"
status=0
times=()
for script in bench/*.py; do
    echo "== $script --quick"
    start=$SECONDS
    if ! "$venv/bin/python" "$script" --quick; then
        echo "bench-quick.sh: $script --quick failed" >&2
        status=1
    fi
    times+=("$(printf '%5d s  %s' $((SECONDS - start)) "$script")")
done
echo "== wall-clock time of each quick mode (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s\n' "${times[@]}"
exit "$status"
