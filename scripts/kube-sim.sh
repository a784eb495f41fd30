#!/usr/bin/env bash
# A simulated Kubernetes cluster on this machine (loopback only): the upstream control plane,
# Volcano, Kueue and JobSet (and the LeaderWorkerSet controller with --components …,lws),
# and kwok GPU nodes in racks under spines.
#
#   scripts/kube-sim.sh up [--nodes N] [--gpus-per-node G] [--racks R] [--spines S] [--dir DIR]
#                          [--components etcd,apiserver,...]
#   scripts/kube-sim.sh down [--dir DIR]
#
# `up` prints `export KUBECONFIG=…` on stdout: eval "$(scripts/kube-sim.sh up)". The binaries
# come from scripts/kube_components.py (install-test-deps.sh runs it). The code is trainops_testing/kube_cluster.py,
# the same the pytest fixtures use.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${TRAINOPS_TEST_VENV:-.venv}/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m trainops_testing.kube_cluster "$@"
