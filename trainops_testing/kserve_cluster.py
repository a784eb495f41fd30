"""KServe's controller manager (v0.20.0, `scripts/kube_components.py kserve`) beside a running
simulated cluster (trainops_testing/kube_cluster.py), as a real process on loopback.

It installs KServe's CRDs (the vendored InferenceService CRD, the others upstream's own
config/crd/full at the same version) and its `inferenceservice-config` ConfigMap (upstream's
config/configmap/inferenceservice.yaml, with `deploy.defaultDeploymentMode` set by the caller),
both from tests/upstream/, then starts the manager with its metrics and health endpoints on 127.0.0.1.

No admission webhooks are registered with the API server: the pod mutator would add KServe's
storage initializer (trainops pulls the model with its own init container) and the
InferenceService validator has no opinion on canaryTrafficPercent, the field under test. The
manager's webhook server still starts (controller-runtime's readiness check waits for it),
on a free port with the cluster's webhook certificate; KServe's main offers no flag for its
bind host, so it listens on every interface of this machine (nothing calls it).
No Knative Serving: KServe's Knative mode cannot run here (see docs/development/testing.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.kube_bins import binary, upstream

NAMESPACE = "kserve"
CONFIG_MAP = "inferenceservice-config"
VENDORED_ISVC = Path(__file__).resolve().parent.parent / "trainops" / "render" / "crds" / "kserve-inferenceservice.yaml"


def crd_files() -> list[Path]:
    """KServe's CRDs at the pinned version; InferenceService from trainops' vendored copy."""
    full = upstream("kserve") / "config" / "crd" / "full"
    others = sorted(p for p in full.glob("serving.kserve.io_*.yaml") if "inferenceservices" not in p.name)
    return [VENDORED_ISVC, *others]


def config_map(default_mode: str) -> dict[str, Any]:
    """Upstream's inferenceservice-config with the cluster-wide default deployment mode."""
    path = upstream("kserve") / "config" / "configmap" / "inferenceservice.yaml"
    doc = next(d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "ConfigMap")
    doc["data"]["deploy"] = json.dumps({"defaultDeploymentMode": default_mode})
    doc["metadata"]["namespace"] = NAMESPACE
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"], "data": doc["data"]}


def start_kserve(cluster: Any, *, default_mode: str = "Standard") -> None:
    """Start the manager on ``cluster`` (a running KubeCluster); it stops with the cluster."""
    exe = binary("kserve-manager")  # before anything is installed: a missing build fails first
    cluster.install_crds(crd_files())
    cluster.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    cluster.api.apply(config_map(default_mode))
    # controller-runtime's default certificate directory is under os.TempDir(): TMPDIR points it here
    tmp = cluster.directory / "kserve-tmp"
    certs = tmp / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copy(cluster.pki / "webhook.crt", certs / "tls.crt")
    shutil.copy(cluster.pki / "webhook.key", certs / "tls.key")
    health, metrics, webhook = cluster._port("kserve"), cluster._port("kserve-metrics"), cluster._port("kserve-webhook")
    cluster._spawn(
        "kserve-manager",
        exe,
        [
            f"--health-probe-addr=127.0.0.1:{health}",
            f"--metrics-addr=127.0.0.1:{metrics}",
            f"--webhook-port={webhook}",
            "--leader-elect=false",
        ],
        what="kserve controller manager",
        ready=cluster._healthz(f"http://127.0.0.1:{health}/readyz"),
        env={"KUBECONFIG": str(cluster.kubeconfig), "POD_NAMESPACE": NAMESPACE, "TMPDIR": str(tmp)},
    )
