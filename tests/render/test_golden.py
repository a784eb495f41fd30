"""Every target rendered from the tiny-llm example (and variants) matches its golden files.

Golden files live in tests/golden/render/<case>/<path of the rendered file>; after an
intended change, regenerate them with TRAINOPS_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import COMMIT, REPO, render, train, variant
from trainops.render import render_tenants, render_train, validate_objects
from trainops_testing.projects import merge

GOLDEN = REPO / "tests" / "golden" / "render"
UPDATE = os.environ.get("TRAINOPS_UPDATE_GOLDEN") == "1"

KUEUE_TOPOLOGY = {"mode": "hard", "highestTierAllowed": None, "level": "cloud.provider.com/topology-block"}
FABRIC = {
    "name": "gpu-fabric",
    "nodeLabels": {"node.trainops.dev/pool": "gpu"},
    "tiers": [
        {"name": "rack", "nodeLabel": "topology.trainops.dev/rack"},
        {"name": "spine", "nodeLabel": "topology.trainops.dev/spine"},
    ],
    "domains": {"spine-0": {"rack-0": {}, "rack-1": {}}, "spine-1": {"rack-2": {}}},
}
CASES: dict[str, dict[str, Any]] = {
    # The example as written: Volcano Job + a Volcano Queue for the tenant.
    "volcano": {},
    # Kueue JobSet on an OCI registry: TAS, a shared checkpoint PVC, registry credentials, a patch.
    "kueue-jobset": {
        "spec": {
            "registry": "oci://harbor.example.com/llm",
            "train": {
                "scheduler": "kueue",
                "topology": KUEUE_TOPOLOGY,
                "checkpoint": {"claim": "tiny-llm-ckpt", "registrySecret": "harbor-creds"},
                "serviceAccount": "trainer",
            },
            "patches": [{"target": {"kind": "JobSet"}, "merge": {"metadata": {"labels": {"cost-center": "ml"}}}}],
        }
    },
    # Kueue with an Indexed Job + headless Service; soft topology; quotas for every resource.
    "kueue-job": {
        "spec": {
            "registry": "oci://registry.internal:5000/llm",
            "insecureRegistries": ["registry.internal:5000"],
            "train": {
                "scheduler": "kueue",
                "kueue": {"workload": "job"},
                "topology": {**KUEUE_TOPOLOGY, "mode": "soft"},
                "ttlAfterFinished": "24h",
            },
            "tenants": [
                {
                    "name": "research",
                    "namespaces": ["tiny-llm", "tiny-llm-dev"],
                    "gpus": {"guarantee": 8, "deserved": 16},
                    "cpu": {"deserved": 256},
                    "memory": {"deserved": "2Ti", "capability": "4Ti"},
                },
                {"name": "batch", "namespaces": ["batch"], "gpus": {"capability": 64}, "flavor": "h100"},
            ],
        }
    },
    # A cluster topology declared once (racks under spines): Volcano HyperNodes, and the job
    # kept inside one rack (networkTopology highestTierAllowed 1).
    "volcano-topology": {"spec": {"cluster": {"topology": FABRIC}}},
    # The same topology under Kueue: a Topology and its ResourceFlavor (the tenant's quota is in
    # it), and highestTierAllowed 1 becomes the rack label as the required topology.
    "kueue-topology": {
        "spec": {
            "cluster": {"topology": FABRIC},
            "train": {"scheduler": "kueue"},
            "tenants": [{"name": "research", "namespaces": ["tiny-llm"], "gpus": {"deserved": 128}}],
            "patches": None,
        }
    },
    # Kubeflow PyTorchJob, elastic between 2 and 8 nodes, on S3.
    "pytorchjob": {
        "spec": {
            "registry": "s3://ml-artifacts/llm",
            "train": {
                "scheduler": "pytorchjob",
                "nodes": 4,
                "elastic": {"minNodes": 2, "maxNodes": 8},
                "topology": None,
            },
            "patches": [
                {"target": {"kind": "PyTorchJob"}, "merge": {"spec": {"runPolicy": {"cleanPodPolicy": "All"}}}}
            ],
        }
    },
    # KubeRay RayJob queued by Kueue: a head and 2 workers on a shared checkpoint PVC, the
    # entrypoint train.command shell-quoted, the tenant's Kueue queues, a patch of the RayJob.
    "ray": {
        "spec": {
            "registry": "oci://harbor.example.com/llm",
            "train": {
                "scheduler": "ray",
                "nodes": 3,
                "topology": None,
                "command": ["python", "-m", "tiny_llm.train", "--run-name", "it's a ray run"],
                "checkpoint": {"claim": "tiny-llm-ckpt"},
            },
            "patches": [{"target": {"kind": "RayJob"}, "merge": {"spec": {"submitterConfig": {"backoffLimit": 1}}}}],
        }
    },
    # A one-node RayJob without a queue (the default scheduler places its pods): no worker group.
    "ray-one-node": {
        "spec": {
            "registry": "oci://harbor.example.com/llm",
            "train": {"scheduler": "ray", "nodes": 1, "queue": None, "topology": None, "maxRunDuration": None},
            "patches": None,
            "tenants": None,
        }
    },
    # Kubeflow Trainer v2: trainops' TrainingRuntime and the TrainJob over it, queued by Kueue;
    # a patch of the Trainer's JobSet becomes a RuntimePatch.
    "kubeflow": {
        "spec": {
            "registry": "oci://harbor.example.com/llm",
            "train": {"scheduler": "kubeflow", "topology": None, "serviceAccount": "trainer"},
            "tenants": [{"name": "research", "namespaces": ["tiny-llm"], "gpus": {"deserved": 16}}],
            "patches": [
                {
                    "target": {"kind": "JobSet"},
                    "merge": {"metadata": {"labels": {"cost-center": "ml"}}},
                }
            ],
        }
    },
    # Kubeflow Trainer v2 over the cluster's torch-distributed ClusterTrainingRuntime: what trainops
    # needs on its pods is a RuntimePatch.
    "kubeflow-cluster-runtime": {
        "spec": {
            "registry": "oci://harbor.example.com/llm",
            "train": {
                "scheduler": "kubeflow",
                "topology": None,
                "queue": None,
                "priorityClass": None,
                "kubeflow": {"runtime": "torch-distributed"},
                "nodeSelector": {"nvidia.com/gpu.product": "H100"},
                "datasets": None,
            },
            "patches": None,
            "tenants": None,
        }
    },
    # Kubernetes' own gang (1.37 Workload API) for the default scheduler: a Workload, its
    # PodGroup (minCount 2) and an Indexed Job whose pods name it; no queues to render.
    "kubernetes": {
        "spec": {
            "train": {"scheduler": "kubernetes", "queue": None, "topology": None},
            "patches": [{"target": {"kind": "Job"}, "merge": {"metadata": {"labels": {"cost-center": "ml"}}}}],
            "tenants": None,
        }
    },
    # Slurm sbatch under pyxis; patches and tenants are Kubernetes-only.
    "slurm": {
        "spec": {
            "registry": "oci://harbor.example.com/llm",
            "train": {
                "scheduler": "slurm",
                "topology": None,
                "slurm": {"partition": "gpu", "account": "ml", "qos": "high", "time": "2-00:00:00"},
            },
            "patches": None,
            "tenants": None,
        }
    },
    # Slurm on bare metal (no container): setup lines, then `trainops train run --slurm`.
    "slurm-bare-metal": {
        "spec": {
            "train": {
                "scheduler": "slurm",
                "topology": None,
                "datasets": None,
                "command": ["tiny-llm-train"],
                "slurm": {
                    "partition": "cpu",
                    "time": "01:00:00",
                    "runtime": "bare-metal",
                    "exclusive": False,
                    "setup": ["module load python/3.11", "source /shared/envs/tiny-llm/bin/activate"],
                },
            },
            "patches": None,
            "tenants": None,
        }
    },
}


# Retention is set here, not taken from the example, so editing the example's keep does not
# change every golden file.
PINNED = {"spec": {"train": {"checkpoint": {"keep": {"last": 5, "best": 1, "metric": "val_loss", "mode": "min"}}}}}


def _rendered(case: str, tmp_path: Path) -> dict[str, str]:
    manifest = variant(tmp_path, merge(CASES[case], PINNED))  # keeps the case's None (remove) markers
    result = render(manifest, commit=COMMIT)
    assert validate_objects(result.objects, sources=result.sources) == []
    return {item.path: item.text for item in result.files}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_files_match_golden(case: str, tmp_path: Path) -> None:
    files = _rendered(case, tmp_path)
    root = GOLDEN / case
    if UPDATE:
        for old in root.rglob("*") if root.exists() else []:
            if old.is_file() and old.relative_to(root).as_posix() not in files:
                old.unlink()
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} if root.exists() else set()
    assert on_disk == set(files), (
        f"{case}: golden files differ from the rendered ones; regenerate with TRAINOPS_UPDATE_GOLDEN=1"
    )
    for rel, text in files.items():
        assert text == (root / rel).read_text(encoding="utf-8"), (
            f"{case}/{rel} changed; regenerate with TRAINOPS_UPDATE_GOLDEN=1 and review the diff"
        )


def test_rendering_is_deterministic(tmp_path: Path) -> None:
    first = _rendered("kueue-jobset", tmp_path / "a")
    second = _rendered("kueue-jobset", tmp_path / "b")
    assert first == second


def test_train_and_tenants_render_separately_as_together(tmp_path: Path) -> None:
    """render_all is render_train and render_tenants, then the path's Argo CD Application and the
    objects of spec.slo.training (rules, the run's PodMonitor and dashboard)."""
    manifest = variant(tmp_path, CASES["volcano"])
    together = render(manifest)
    apart = render_train(
        manifest,
        image=together.objects[0]["metadata"]["annotations"]["trainops.dev/image"],
        run_id="run-20250101-000000-abc123",
    )
    tenants = render_tenants(manifest)
    assert [f.path for f in apart.files] == ["train/volcano-job.yaml"]
    assert [f.path for f in tenants.files] == ["tenants/volcano-queues.yaml"]
    slo = [
        f
        for f in together.files
        if f.path.startswith("slo/") or f.path in ("train/podmonitor.yaml", "train/dashboard.yaml")
    ]
    assert [f.path for f in slo] == ["slo/prometheusrule.yaml", "train/podmonitor.yaml", "train/dashboard.yaml"]
    rest = [f for f in together.files if f not in slo]
    assert apart.files + tenants.files == rest[:-1]
    assert rest[-1].path == "argocd/application.yaml"


def test_local_scheduler_renders_nothing(tmp_path: Path) -> None:
    manifest = variant(tmp_path, train({"scheduler": "local", "nodes": 1, "gpusPerNode": 0, "topology": None}))
    result = render(manifest)
    assert result.files == [] and result.objects == []
