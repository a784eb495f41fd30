#!/usr/bin/env bash
# trainops' main job on its embedded default: no servers. The registry is an OCI image
# layout under examples/tiny-llm/.trainops/registry and the GitOps repo a bare git repo
# beside it. It installs trainops into a venv, checks and plans the tiny-llm pipeline,
# renders its training image, trains the model on the CPU with `train run --local` (the
# checkpoint watcher pushes every complete checkpoint with lineage), replaces the "node"
# and resumes from the registry, lists and pulls the newest checkpoint, evaluates it against
# its quality gates (and shows a tightened gate failing), releases the best checkpoint with a
# passing eval as a ModelPack model, prints the lineage, then renders the cluster job,
# validates it and commits it to GitOps, and rolls the releases out through the GitOps
# repo (start, promote, status, history).
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

echo "== pull the newest back (verified)"
rm -rf .trainops/pulled
"$trainops" ckpt pull --latest .trainops/pulled

echo "== evaluate the newest checkpoint against its gates; the report is pushed beside it"
"$trainops" eval run --env dev
echo "== a gate tightened by an environment overlay fails: exit 8, the failed report is pushed"
set +e
"$trainops" eval run --env dev-strict -o json > .trainops/strict-eval.json
code=$?
set -e
[ "$code" = 8 ] || { echo "expected exit 8 from the tightened gate, got $code" >&2; exit 1; }
"$trainops" eval ls --env dev

echo "== release the best checkpoint that passed its gates as a ModelPack model (immutable tag)"
"$trainops" release create --env dev -o json > .trainops/release.json
release="$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["ref"])' .trainops/release.json)"
"$trainops" release show "$release"
"$trainops" release ls
echo "== lineage: model ← eval ← step-1000 ← … ← step-700 ← resumed-from step-600 ← … ← step-100 (retention pruned the oldest)"
"$trainops" lineage "$release"

echo "== the cluster side: render the Volcano job and tenant queues, validated against the upstream CRDs"
"$trainops" validate --render
# No image is built offline (no engine, no base image in a registry), so this shows the
# render with an explicitly placeholder digest; a real run pins the image it built.
placeholder="registry.example.com/tiny-llm/image@sha256:$(printf '0%.0s' $(seq 64))"
"$trainops" train render --image "$placeholder" --run-id main-job --out .trainops/rendered
"$trainops" train submit --image "$placeholder" --run-id main-job
echo "== the eval as a cluster Job (Volcano): \`trainops eval run\` on the pinned checkpoint, in the image"
"$trainops" eval render --image "$placeholder" --run-id main-job > .trainops/eval-job.yaml
grep -E '^kind:|^  name:' .trainops/eval-job.yaml
git --git-dir .trainops/gitops.git log -1 --format='%H%n%B' main

echo "== serving: gray release through the GitOps repo (each action one commit)"
echo "   analysis skipped: there is no Prometheus here; \`rollout promote --auto\` would measure the canary first"
# The release before it (step-900, evaluated and released the same way) is served first and
# becomes stable; the new one then starts as a canary.
"$trainops" eval run tiny-llm/checkpoints:step-900 --env dev > /dev/null
"$trainops" release create tiny-llm/checkpoints:step-900 --env dev -o json > .trainops/release-900.json
previous="$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["ref"])' .trainops/release-900.json)"
# As for the training job: no serving image is built offline, so a placeholder digest.
serve_image="registry.example.com/tiny-llm/serve-vllm@sha256:$(printf '0%.0s' $(seq 64))"
"$trainops" rollout start "$previous" --env dev --image "$serve_image"
"$trainops" rollout start "$release" --env dev --image "$serve_image"
"$trainops" rollout promote --env dev
"$trainops" rollout status --env dev
"$trainops" rollout history --env dev
"$trainops" lineage "$release" --down
