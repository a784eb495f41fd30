#!/usr/bin/env bash
# trainops' main job on its embedded default: no servers. The registry is an OCI image
# layout under examples/tiny-llm/.trainops/registry and the GitOps repo a bare git repo
# beside it. It installs trainops into a venv, checks and plans the tiny-llm pipeline,
# renders its training image, trains the model on the CPU with `train run --local` (the
# checkpoint watcher pushes every complete checkpoint with lineage), replaces the "node"
# and resumes from the registry, lists, pulls and evaluates the newest checkpoint, prints
# the lineage, then renders the cluster job, validates it and commits it to GitOps.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_VENV:-.venv}"
case "$venv" in /*) ;; *) venv="$(pwd)/$venv" ;; esac
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet . ./examples/tiny-llm
export PATH="$venv/bin:$PATH"  # train.command runs `python` from PATH, as a pod would
trainops="$venv/bin/trainops"
python="$venv/bin/python"

cd examples/tiny-llm
rm -rf .trainops checkpoints
echo "== validate and plan"
"$trainops" validate
"$trainops" plan --env dev
echo "== the training image's Dockerfile (building it needs an engine or a base image in a registry)"
mkdir -p .trainops && "$trainops" image render > .trainops/Dockerfile && head -n 12 .trainops/Dockerfile

echo "== train on this machine (--env dev: the local scheduler), checkpoints pushed as they land"
# The watcher beside the trainer pushes each complete checkpoint with lineage and keeps
# the last 5 plus the best by val_loss (train.checkpoint.keep); -e overrides train.env.
"$trainops" train run --local --env dev --run-id first-node -e TRAINOPS_MAX_STEPS=600 | tail -n 1

echo "== the node is replaced: its disk is gone; the new run pulls the newest checkpoint and resumes"
rm -rf .trainops/runs
"$trainops" train run --local --env dev --run-id second-node | tail -n 1

echo "== the checkpoints in the registry"
"$trainops" ckpt ls
latest="$("$trainops" ckpt latest)"
echo "latest: $latest"
"$trainops" registry diff tiny-llm/checkpoints:step-900 tiny-llm/checkpoints:step-1000

echo "== pull the newest back (verified) and evaluate it"
rm -rf .trainops/pulled
"$trainops" ckpt pull --latest .trainops/pulled
"$python" -m tiny_llm.eval --checkpoint ".trainops/pulled/$(ls .trainops/pulled | grep '^step-' | tail -n 1)"

echo "== lineage: step-1000 ← … ← step-700 ← resumed-from step-600 ← … ← step-100 (retention pruned the oldest)"
"$trainops" lineage "$latest"

echo "== the cluster side: render the Volcano job and tenant queues, validated against the upstream CRDs"
"$trainops" validate --render
# No image is built offline (no engine, no base image in a registry), so this shows the
# render with an explicitly placeholder digest; a real run pins the image it built.
placeholder="registry.example.com/tiny-llm/image@sha256:$(printf '0%.0s' $(seq 64))"
"$trainops" train render --image "$placeholder" --run-id main-job --out .trainops/rendered
"$trainops" train submit --image "$placeholder" --run-id main-job
git --git-dir .trainops/gitops.git log -1 --format='%H%n%B' main
