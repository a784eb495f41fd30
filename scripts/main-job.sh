#!/usr/bin/env bash
# trainops' main job on its embedded default: no servers. The registry is an OCI image
# layout under examples/tiny-llm/.trainops/registry. It installs trainops into a venv,
# checks and plans the tiny-llm pipeline, renders its training image, trains the model on the CPU, pushes its
# checkpoints with lineage (each resumed checkpoint names its parent), lists them, pulls
# one back verified, and prints the lineage graph.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet . ./examples/tiny-llm
trainops="$(pwd)/$venv/bin/trainops"
python="$(pwd)/$venv/bin/python"

cd examples/tiny-llm
rm -rf .trainops checkpoints
echo "== validate and plan"
"$trainops" validate
"$trainops" plan --env dev
echo "== the training image's Dockerfile (building it needs an engine or a base image in a registry)"
mkdir -p .trainops && "$trainops" image render > .trainops/Dockerfile && head -n 12 .trainops/Dockerfile

echo "== train 300 steps, then resume to 600 (checkpoints every 300)"
export TRAINOPS_CKPT_DIR=checkpoints TRAINOPS_CKPT_EVERY=300 TRAINOPS_RUN_ID=main-job
TRAINOPS_MAX_STEPS=300 "$python" -m tiny_llm.train | tail -n 1
"$trainops" push checkpoints/step-000300 tiny-llm/checkpoints:step-300 --kind checkpoint \
    --step 300 --run-id main-job \
    --metric "val_loss=$("$python" -c 'import json;print(json.load(open("checkpoints/step-000300/trainer_state.json"))["metrics"]["val_loss"])')"
TRAINOPS_MAX_STEPS=600 "$python" -m tiny_llm.train | tail -n 1
"$trainops" push checkpoints/step-000600 tiny-llm/checkpoints:step-600 --kind checkpoint \
    --step 600 --run-id main-job --parent tiny-llm/checkpoints:step-300 \
    --metric "val_loss=$("$python" -c 'import json;print(json.load(open("checkpoints/step-000600/trainer_state.json"))["metrics"]["val_loss"])')"

echo "== the registry"
"$trainops" registry ls
"$trainops" registry ls tiny-llm/checkpoints
"$trainops" registry diff tiny-llm/checkpoints:step-300 tiny-llm/checkpoints:step-600

echo "== pull step-600 back (verified) and evaluate it"
rm -rf .trainops/pulled
"$trainops" pull tiny-llm/checkpoints:step-600 .trainops/pulled
"$python" -m tiny_llm.eval --checkpoint .trainops/pulled

echo "== lineage"
"$trainops" lineage tiny-llm/checkpoints:step-600
