"""What a cluster must run to take a kind trainops renders, and how to install it: the one
table behind every "the cluster does not serve …" (trainops.cluster.client: a dry run of
`validate --kubeconfig`, a `train submit` with a cluster named).

A kind is served when its CRD is installed; the controller that acts on it runs beside the
API server (a Deployment in a namespace of the installer's choice), which the API does not
name, so only the CRD is checked."""

from __future__ import annotations

GENERIC = "install its CRD (or the controller that brings it) in the cluster"

# API group → what brings it, and how (the release trainops is tested with)
INSTALLS: dict[str, str] = {
    "ray.io": (
        "install the KubeRay operator, which brings the RayJob and RayCluster CRDs and runs them (trainops is "
        "tested with v1.5.0): helm repo add kuberay https://ray-project.github.io/kuberay-helm/ && "
        "helm install kuberay-operator kuberay/kuberay-operator --version 1.5.0"
    ),
    "trainer.kubeflow.org": (
        "install Kubeflow Trainer v2, which brings the TrainJob, TrainingRuntime and ClusterTrainingRuntime CRDs "
        "and runs them (trainops is tested with v2.3.0): kubectl apply --server-side -k "
        "'https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0'"
    ),
    # built in, not a CRD: Kubernetes 1.37's Workload API (beta, off by default)
    "scheduling.k8s.io": (
        "the Workload API of Kubernetes 1.37+ is off: start kube-apiserver with "
        "--feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1beta1=true, and "
        "kube-scheduler and kube-controller-manager with --feature-gates=GenericWorkload=true (on a managed "
        "cluster, ask for the gate), or use scheduler volcano or kueue"
    ),
}
RUNTIMES = (
    "kubectl apply --server-side -k 'https://github.com/kubeflow/trainer.git/manifests/overlays/runtimes?ref=v2.3.0'"
)


def install_hint(api_version: str) -> str:
    """How to make a cluster serve `api_version` (group/version)."""
    group = api_version.rpartition("/")[0]
    return INSTALLS.get(group, GENERIC)
