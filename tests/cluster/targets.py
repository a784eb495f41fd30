"""The targets the cluster tests send to the real API server: every training scheduler and
serving traffic mode of the tiny-llm example, each in every environment the example has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainops.cluster.dryrun import Sent, rendered_objects
from trainops.manifest import Manifest, load_manifest
from trainops_testing.projects import EXAMPLE, merge

# the simulated cluster's fabric (trainops_testing/kube_cluster.py labels its kwok nodes so)
FABRIC: dict[str, Any] = {
    "name": "gpu-fabric",
    "nodeLabels": {"node.trainops.dev/pool": "gpu"},
    "tiers": [
        {"name": "rack", "nodeLabel": "topology.trainops.dev/rack"},
        {"name": "spine", "nodeLabel": "topology.trainops.dev/spine"},
    ],
    "domains": {"spine-0": {"rack-0": {}, "rack-1": {}}},
}
KUEUE_TENANTS = [
    {
        "name": "research",
        "namespaces": ["tiny-llm"],
        "gpus": {"deserved": 32},
        "cpu": {"deserved": 256},
        "memory": {"deserved": "4Ti"},
    }
]
KUEUE = {"scheduler": "kueue", "topology": {"level": "topology.trainops.dev/rack", "highestTierAllowed": None}}

VARIANTS: dict[str, dict[str, Any]] = {
    # the example as written: Volcano Job, Volcano Queue, eval Job, Argo Rollouts serving
    "volcano": {},
    "volcano-topology": {"spec": {"cluster": {"topology": FABRIC}}},
    "kueue-jobset": {"spec": {"train": KUEUE, "tenants": KUEUE_TENANTS, "patches": None}},
    "kueue-job": {"spec": {"train": {**KUEUE, "kueue": {"workload": "job"}}, "tenants": KUEUE_TENANTS}},
    "kueue-topology": {
        "spec": {
            "train": {"scheduler": "kueue"},  # highestTierAllowed 1: the rack label
            "tenants": KUEUE_TENANTS,
            "patches": None,
            "cluster": {"topology": FABRIC},
        }
    },
    "pytorchjob": {"spec": {"train": {"scheduler": "pytorchjob", "topology": None}, "patches": None}},
    "ray": {"spec": {"train": {"scheduler": "ray", "topology": None}, "tenants": KUEUE_TENANTS, "patches": None}},
    # Kubeflow Trainer v2: trainops' TrainingRuntime and the TrainJob, a JobSet patch as a RuntimePatch
    "kubeflow": {
        "spec": {
            "train": {"scheduler": "kubeflow", "topology": None},
            "tenants": KUEUE_TENANTS,
            "patches": [{"target": {"kind": "JobSet"}, "merge": {"metadata": {"labels": {"cost-center": "ml"}}}}],
        }
    },
    "gateway-api": {"spec": {"rollout": {"traffic": "gateway-api"}}},
    "kserve": {"spec": {"rollout": {"traffic": "kserve", "abTest": None}}},
    "multi-node-serving": {
        "spec": {
            "rollout": {
                "traffic": "gateway-api",
                "gpusPerReplica": 16,
                "gpusPerNode": 8,
                "tensorParallel": 8,
                "pipelineParallel": 2,
            }
        }
    },
}


def environments() -> list[str | None]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    return [None, *data.get("environments", {})]


def write_variant(directory: Path, name: str, *, pipeline: str | None = None) -> Path:
    """The example with the variant's overlay (and another pipeline name, so that objects of
    different variants and environments do not share names in one cluster)."""
    data = merge(yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")), VARIANTS[name])
    if pipeline is not None:
        data["metadata"]["name"] = pipeline
    for overlay in data.get("environments", {}).values():
        scheduler = (overlay.get("train") or {}).get("scheduler")
        if scheduler in ("local", "slurm") and "kueue" in data["spec"]["train"]:
            overlay["train"]["kueue"] = None  # the environment's scheduler takes no Kueue options
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "trainops.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def manifests(directory: Path) -> list[Manifest]:
    """Every variant in every environment of the example, each its own pipeline (t00, t01, …)."""
    out = []
    for name in VARIANTS:
        for env in environments():
            pipeline = f"t{len(out):02d}"
            out.append(load_manifest(write_variant(directory / pipeline, name, pipeline=pipeline), env=env))
    return out


def sent(manifest: Manifest) -> list[Sent]:
    from trainops.rollout.check import serving_sent

    return rendered_objects(manifest) + (serving_sent(manifest) if manifest.pipeline.spec.rollout else [])
