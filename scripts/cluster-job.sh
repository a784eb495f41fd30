#!/usr/bin/env bash
# trainops' whole flow on the simulated Kubernetes cluster with the real controllers (a second
# main job, not one of the README's two commands): a `git push` to the project's local remote,
# whose post-receive hook runs `trainops ci` for the pushed range; Argo CD syncing the training
# path from the GitOps repo (served over git's HTTP transport on loopback) and the Volcano
# scheduler placing the job's gang on distinct nodes; then v2's canary walked to stable by
# Argo Rollouts, each step a trainops commit. It prints each step, exits non-zero on any
# failure and stops every process it started. Needs the binaries of `scripts/kube_components.py
# etcd kubernetes kwok volcano argocd rollouts` and Debian's redis-server
# (scripts/install-test-deps.sh installs both). scripts/cluster_job.py does the work.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_VENV:-.venv}"
case "$venv" in /*) ;; *) venv="$(pwd)/$venv" ;; esac
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e '.[dev]' -e ./examples/tiny-llm
exec "$venv/bin/python" scripts/cluster_job.py
