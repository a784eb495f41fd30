"""scheduler kubeflow: a Kubeflow Trainer v2 TrainJob over trainops' runtime or the cluster's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import container, only, render, templates, variant
from trainops.errors import InputError, ManifestError
from trainops.render.quantity import canonical
from trainops_testing.cli import run
from trainops_testing.projects import write_variant

KUBEFLOW: dict[str, Any] = {"scheduler": "kubeflow", "topology": None}


def _train(extra: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"spec": {"train": {**KUBEFLOW, **(extra or {})}, "patches": None, **spec}}


def test_the_runtime_carries_the_checkpoint_agents_and_the_trainjob_what_runs(tmp_path: Path) -> None:
    rendered = render(variant(tmp_path, _train()))
    runtime, job = only(rendered, "TrainingRuntime"), only(rendered, "TrainJob")
    assert [f.path for f in rendered.files if f.path.startswith("train/trainjob")] == ["train/trainjob.yaml"]
    name = job["metadata"]["name"]
    assert job["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": name}
    assert runtime["metadata"]["name"] == name
    node = templates(runtime)["node"]
    assert [c["name"] for c in node["spec"]["initContainers"]] == ["ckpt-restore", "dataset-corpus", "ckpt-watch"]
    assert "--leader-only" in container(node, "ckpt-watch")["command"]
    # what runs is the TrainJob's, not the runtime's
    assert set(container(node, "node")) & {"image", "command", "env", "resources"} == set()
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 2 and trainer["image"].endswith(rendered.objects[0]["metadata"]["annotations"][
        "trainops.dev/image"].rsplit("/", 1)[1])  # fmt: skip
    assert f"--rdzv-endpoint={name}-node-0-0.{name}:29500" in trainer["command"]
    # queued by Kueue: the tenant's LocalQueue
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert runtime["spec"]["template"]["spec"]["failurePolicy"] == {"maxRestarts": 3}


def test_patches_of_the_trainers_jobset_become_runtime_patches_in_order(tmp_path: Path) -> None:
    patches = [
        {"target": {"kind": "TrainJob"}, "merge": {"metadata": {"labels": {"team": "a"}}}},
        {"target": {"kind": "JobSet"}, "merge": {"metadata": {"annotations": {"x": "1"}}}},
        {"target": {"kind": "JobSet"}, "merge": {"metadata": {"labels": {"y": "2"}}}},
    ]
    job = only(render(variant(tmp_path, {"spec": {"train": KUBEFLOW, "patches": patches}})), "TrainJob")
    assert job["metadata"]["labels"]["team"] == "a"  # a merge patch of a rendered object, as for every target
    assert job["spec"]["runtimePatches"] == [
        {"manager": "trainops.dev/spec.patches.1", "trainingRuntimeSpec": {"template": patches[1]["merge"]}},
        {"manager": "trainops.dev/spec.patches.2", "trainingRuntimeSpec": {"template": patches[2]["merge"]}},
    ]


def test_a_jobset_patch_naming_another_jobset_is_one_line_at_the_patch(tmp_path: Path) -> None:
    patches = [{"target": {"kind": "JobSet", "name": "other"}, "merge": {"metadata": {"labels": {"y": "2"}}}}]
    with pytest.raises(InputError, match=r"^spec.patches\[0\]: no rendered JobSet named other to patch;"):
        render(variant(tmp_path, {"spec": {"train": KUBEFLOW, "patches": patches}}))


def test_a_cluster_runtime_gets_the_runs_labels_and_volumes_as_a_runtime_patch(tmp_path: Path) -> None:
    overlay = _train({"kubeflow": {"runtime": "torch-distributed"}, "datasets": None, "priorityClass": None})
    rendered = render(variant(tmp_path, overlay))
    assert [o["kind"] for o in rendered.objects if o["kind"] == "TrainingRuntime"] == []
    job = only(rendered, "TrainJob")
    assert job["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    (patch,) = job["spec"]["runtimePatches"]
    assert patch["manager"] == "trainops.dev/run"
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["trainops.dev/run-id"] == job["metadata"]["labels"]["trainops.dev/run-id"]
    assert [c["name"] for c in pod["spec"]["containers"]] == ["node"]
    assert any("neither restored nor pushed" in w for w in rendered.warnings)


def test_a_dataset_the_cluster_runtime_cannot_pull_is_one_line_at_the_dataset(tmp_path: Path) -> None:
    overlay = _train({"kubeflow": {"runtime": "torch-distributed"}})
    with pytest.raises(InputError, match=r"^train.datasets\[0\] \(corpus\) would be pulled by an init container"):
        render(variant(tmp_path, overlay))


def test_kubeflow_options_need_scheduler_kubeflow(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="kubeflow options are set but scheduler is not kubeflow"):
        variant(tmp_path, {"spec": {"train": {"kubeflow": {"runtime": "torch-distributed"}}}})


def test_validate_render_checks_the_trainjob_against_the_trainer_crds(tmp_path: Path) -> None:
    path = write_variant(tmp_path, _train())
    out = run("validate", "-f", str(path), "--render")
    assert out.code == 0, out.stderr
    assert "kubeflow: " in out.stdout and "TrainJob 1" in out.stdout and "TrainingRuntime 1" in out.stdout
    # a field a RuntimePatch may not set is refused at its path, offline
    bad = [{"target": {"kind": "JobSet"}, "merge": {"spec": {"failurePolicy": {"maxRestarts": 1}}}}]
    path = write_variant(tmp_path / "bad", {"spec": {"train": KUBEFLOW, "patches": bad}})
    out = run("validate", "-f", str(path), "--render")
    assert out.code != 0
    assert "runtimePatches[0].trainingRuntimeSpec.template.spec.failurePolicy" in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("given", "stored"),
    [(32, "32"), ("32", "32"), (1000, "1k"), ("0.5", "500m"), ("1500m", "1500m"), ("256Gi", "256Gi"),
     ("1.5Gi", "1536Mi"), ("2048Mi", "2Gi"), ("1023", "1023"), (0, "0")],
)  # fmt: skip
def test_quantities_are_rendered_as_the_trainers_webhooks_store_them(given: int | str, stored: str) -> None:
    """spec.trainer is immutable: a re-apply must send the text the API server holds, which
    the Trainer's webhooks wrote through Go's canonical quantities."""
    assert canonical(given) == stored


def test_the_trainjobs_resources_are_canonical_quantities(tmp_path: Path) -> None:
    job = only(render(variant(tmp_path, _train())), "TrainJob")
    assert job["spec"]["trainer"]["resourcesPerNode"]["limits"] == {
        "cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "1",
    }  # fmt: skip
