#!/usr/bin/env bash
# trainops' main job on its embedded default: no servers. The registry is an OCI image
# layout under examples/tiny-llm/.trainops/registry and the GitOps repo a bare git repo
# beside it. It installs trainops into a venv and checks the tiny-llm pipeline; a first
# training (600 steps) is evaluated, released and served as the stable model; then the
# node is replaced and `trainops run` carries the whole flow — training resumed from the
# registry, eval gates, release, a canary rollout commit — and a second `trainops run`
# finds every stage cached. A release is signed and verified, a tightened gate fails, the
# canary is promoted, the cluster side is rendered and committed, and `trainops lineage
# git:HEAD` walks from the commit of the training code to the rollout commits. Last, a fault
# drill against a supervised local training: diagnosed, recorded, restarted, its ETTR shown.
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
logs=.trainops/logs  # what the trainer and the flow print, kept out of this job's output
mkdir -p "$logs"
quietly() {  # run a command with its stderr (progress, the trainer's lines) in $logs/$1; say where
    local name=$1; shift
    if ! "$@" 2> "$logs/$name.txt"; then
        tail -n 40 "$logs/$name.txt" >&2
        echo "main job: FAILED at: $* (whole output: examples/tiny-llm/$logs/$name.txt)" >&2
        exit 1
    fi
    grep '^trainops: ' "$logs/$name.txt" | shorten || true  # trainops' own notes: the run id, where the output is kept
    echo "(its progress and the trainer's output: examples/tiny-llm/$logs/$name.txt)"
}
shorten() {  # digests cut to 12 hex digits, for reading (-o json and `registry show` have them whole)
    sed -E 's/(sha256:[0-9a-f]{12})[0-9a-f]{52}/\1/g'
}
echo "== validate and plan"
"$trainops" validate
"$trainops" plan --env dev
echo "== the training image's Dockerfile (building it needs an engine or a base image in a registry)"
mkdir -p .trainops && "$trainops" image render > .trainops/Dockerfile && head -n 12 .trainops/Dockerfile

echo "== the model served today: a first training (600 steps), evaluated, released, rolled out"
# The watcher beside the trainer pushes each complete checkpoint with lineage and keeps
# the last 5 plus the best by val_loss (train.checkpoint.keep); -e overrides train.env.
if ! "$trainops" train run --local --env dev --run-id first-node -e TRAINOPS_MAX_STEPS=600 \
    > "$logs/first-node.txt" 2>&1; then
    tail -n 40 "$logs/first-node.txt" >&2; echo "main job: FAILED: the first training" >&2; exit 1
fi
grep '^trainops: run first-node' "$logs/first-node.txt" | shorten  # its id, where the trainer's output is kept, how it ended
"$trainops" eval run tiny-llm/checkpoints:step-600 --env dev > /dev/null
"$trainops" release create tiny-llm/checkpoints:step-600 --env dev | shorten
# No serving image is built offline (no engine, no base image in a registry): a placeholder
# digest, said as such; a real run pins the image it built.
serve_image="registry.example.com/tiny-llm/serve-vllm@sha256:$(printf '0%.0s' $(seq 64))"
"$trainops" rollout start tiny-llm/model:v1-step-600 --env dev --image "$serve_image"

echo "== the node is replaced (its disk is gone); \`trainops run\` carries the whole flow"
# image (skipped offline: says why, records the Python environment instead) → train (resumes
# from the newest checkpoint in the registry) → checkpoint → eval (gates) → release → the
# first canary step, committed to the GitOps repo.
rm -rf .trainops/runs
started=$(date +%s)
quietly flow "$trainops" run --env dev --serve-image "$serve_image"
echo "== nothing changed: every stage is cached"
cached_start=$(date +%s.%N)
"$trainops" run --env dev --serve-image "$serve_image" --dry-run
"$trainops" run --env dev --serve-image "$serve_image" -o json > .trainops/run-cached.json
"$python" - .trainops/run-cached.json "$cached_start" <<'PY'
import json, sys, time
stages = json.load(open(sys.argv[1]))["stages"]
ran = [s["stage"] for s in stages if s["status"] == "ran"]
assert not ran, f"a second run with nothing changed ran {ran}"
print(f"second run: {len(stages)} stages, none ran, {time.time() - float(sys.argv[2]):.1f} s")
PY

echo "== the checkpoints in the registry"
"$trainops" ckpt ls
"$trainops" registry diff tiny-llm/checkpoints:step-900 tiny-llm/checkpoints:step-1000
release="$("$trainops" release ls --env dev -o json | "$python" -c 'import json, sys; print(json.load(sys.stdin)[0]["ref"])')"
echo "release: $release" | shorten
"$trainops" lineage "$release"

"$trainops" registry show tiny-llm/checkpoints:step-1000

echo "== a signed release: OpenSSF model signing with a key file, SLSA provenance, verified"
# --env dev-signed adds release.signing; the key pair is made as a user would, with openssl.
mkdir -p .trainops/keys
openssl ecparam -name prime256v1 -genkey -noout -out .trainops/keys/release.pem
openssl ec -in .trainops/keys/release.pem -pubout -out .trainops/keys/release.pub 2> /dev/null
"$trainops" release create --env dev-signed --version v1-signed | shorten
"$trainops" release verify tiny-llm/model:v1-signed --env dev-signed --wide | shorten
"$trainops" pull tiny-llm/model:v1-signed .trainops/signed-model --verify-signature \
    --key .trainops/keys/release.pub

echo "== a gate tightened by an environment overlay fails: exit 8, the failed report is pushed"
set +e
"$trainops" eval run --env dev-strict -o json > .trainops/strict-eval.json
code=$?
set -e
[ "$code" = 8 ] || { echo "expected exit 8 from the tightened gate, got $code" >&2; exit 1; }
"$trainops" eval ls --env dev --wide | shorten

echo "== gray release: promote the canary (analysis skipped: there is no Prometheus here;"
echo "   \`rollout promote --auto\` would measure the canary first)"
"$trainops" rollout promote --env dev
"$trainops" rollout status --env dev --wide | shorten
"$trainops" rollout history --env dev

echo "== the cluster side: the Volcano job, tenant queues and serving objects, validated against the upstream CRDs"
"$trainops" validate --render
placeholder="registry.example.com/tiny-llm/image@sha256:$(printf '0%.0s' $(seq 64))"
"$trainops" train render --image "$placeholder" --run-id main-job --out .trainops/rendered
"$trainops" train submit --image "$placeholder" --run-id main-job
"$trainops" eval render --image "$placeholder" --run-id main-job > .trainops/eval-job.yaml
grep -E '^kind:|^  name:' .trainops/eval-job.yaml

echo "== lineage from the commit of the training code down to the rollout commits"
"$trainops" lineage git:HEAD
echo "main job: the flow took $(( $(date +%s) - started )) s from the node replacement to here"

echo "== a fault drill: \`train run --local\` supervises its trainer; an NCCL watchdog timeout"
echo "   written to the trainer's stderr is diagnosed, recorded and restarted from a checkpoint"
"$trainops" train run --local --env dev --run-id drill-1 -e TRAINOPS_MAX_STEPS=6000 -o json \
    > .trainops/drill-run.json 2> "$logs/drill-1.txt" &
trainer=$!
drilled=
for _ in $(seq 1 120); do  # until the trainer is up (the drill names no process before that)
    if "$trainops" drill nccl-timeout drill-1 --env dev 2> /dev/null; then drilled=1; break; fi
    kill -0 "$trainer" 2> /dev/null || break
    sleep 0.5
done
wait "$trainer" || { tail -n 40 "$logs/drill-1.txt" >&2; echo "main job: FAILED: the drilled run" >&2; exit 1; }
[ -n "$drilled" ] || { echo "the drill found no trainer of run drill-1" >&2; exit 1; }
echo "(the drilled run's output: examples/tiny-llm/$logs/drill-1.txt)"
"$python" - .trainops/drill-run.json <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
assert run["starts"] == 2 and len(run["incidents"]) == 1, f"expected one restart, got {run}"
PY
"$trainops" incidents ls
"$trainops" train status drill-1 --env dev
served="$("$trainops" rollout status --env dev -o json | "$python" -c 'import json, sys; s = json.load(sys.stdin)
print("%s serves as stable, %s as a canary at %s%%" % (s["stable"]["version"], s["canary"]["version"], s["weight"]))')"
ettr="$("$trainops" train status drill-1 --env dev -o json | "$python" -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["ettr"]["ettr"])')"
echo "main job passed: trained, evaluated and released; $served;" \
    "a second run was all cached; a signed release verified; a tightened gate refused (exit 8);" \
    "lineage walked from the training commit; the NCCL drill was recovered (ETTR $ettr)"
