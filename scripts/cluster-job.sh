#!/usr/bin/env bash
# The serving half of trainops' flow on the simulated Kubernetes cluster with the real
# controllers (not one of the README's two commands): Argo CD syncs the GitOps repo, served
# over git's HTTP transport on loopback, and Argo Rollouts walks v2's canary to stable, each
# step a trainops commit; `trainops rollout status --kubeconfig` after each. Needs the
# binaries of `scripts/build-kube.sh etcd kubernetes kwok argocd rollouts` and Debian's
# redis-server (scripts/install-test-deps.sh installs both).
#
# Not here yet: a push to a local remote whose hook runs `trainops ci`, and the training
# job placed by Volcano (the simulated cluster's Volcano is not built on this machine).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TRAINOPS_VENV:-.venv}"
case "$venv" in /*) ;; *) venv="$(pwd)/$venv" ;; esac
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e '.[dev]' -e ./examples/tiny-llm
exec "$venv/bin/python" scripts/cluster_job.py
