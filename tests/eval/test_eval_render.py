"""`trainops eval render` / `eval submit`: the eval Job (batch/v1, or Volcano), golden files,
strict validation (a patch that breaks the Job is refused), and the GitOps commit."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.eval.conftest import PYTHON, Project
from trainops.render.validate import validate_objects

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "eval"
UPDATE = os.environ.get("TRAINOPS_UPDATE_GOLDEN") == "1"
IMAGE = "harbor.example.com/llm/tiny-llm/image@sha256:" + "ab" * 32

CASES: dict[str, dict[str, Any]] = {
    "volcano": {
        "scheduler": "volcano",
        "queue": "research",
        "namespace": "tiny-llm",
        "priorityClass": "research-normal",
        "checkpoint": {"registrySecret": "harbor-creds"},
        "secretEnv": {"AWS_ACCESS_KEY_ID": {"secret": "s3", "key": "id"}, "WANDB_API_KEY": {"secret": "w", "key": "k"}},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
    # the ray target's tenants are Kueue's queues: the eval Job waits in the same LocalQueue
    "ray-queued": {"scheduler": "ray", "queue": "research", "namespace": "tiny-llm"},
    "batch": {
        "scheduler": "pytorchjob",
        "namespace": "tiny-llm",
        "workingDir": "/workspace",
        "resources": {"cpu": 8, "memory": "32Gi"},
        "ttlAfterFinished": "24h",
    },
}


@pytest.fixture
def pinned(local_project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # the same checkpoint digest every run
    local_project.push_checkpoint(3, metrics={"loss": 1.0})
    return local_project


def write(project: Project, train: dict[str, Any], **spec: Any) -> None:
    project.write(
        {
            "image": {"template": "train-pytorch"},
            "train": {"command": [PYTHON, "-m", "tiny_llm.train"], "gpusPerNode": 1, **train},
            "eval": {
                "command": ["python", "-m", "tiny_llm.eval"],
                "checkpoint": "latest",
                "gpus": 1,
                "timeout": "10m",
                "gates": [{"metric": "val_loss", "op": "<=", "value": 2.5}],
            },
            **spec,
        },
        environments={"dev": {"eval": {"gpus": 0}}},
    )


def normalized(text: str, project: Project) -> str:
    return text.replace(str(project.root), "/PROJECT").replace(PYTHON, "PYTHON")


@pytest.mark.parametrize("case", sorted(CASES))
def test_eval_job_matches_its_golden_file_and_validates(pinned: Project, case: str) -> None:
    write(pinned, CASES[case])
    out = pinned.trainops("eval", "render", "--image", IMAGE, "--run-id", "e1", "--env", "dev")
    assert out.code == 0, out.stderr
    assert "local directory a cluster cannot reach" in out.stderr
    text = normalized(out.stdout, pinned)
    golden = GOLDEN / f"{case}.yaml"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8"), f"{golden} differs; regenerate with TRAINOPS_UPDATE_GOLDEN=1"
    objects = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    assert [(o["apiVersion"], o["kind"]) for o in objects] == [
        ("v1", "ConfigMap"),
        ("batch.volcano.sh/v1alpha1" if case == "volcano" else "batch/v1", "Job"),
    ]
    assert validate_objects(objects) == []
    job = objects[1]
    pod = job["spec"]["tasks"][0]["template"] if case == "volcano" else job["spec"]["template"]
    argv = pod["spec"]["containers"][0]["command"]
    assert argv[:3] == ["trainops", "eval", "run"] and "@sha256:" in argv[3] and argv[-2:] == ["--env", "dev"]
    env = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
    assert "WANDB_API_KEY" not in env  # only the registry's credentials reach the eval pod
    manifest = yaml.safe_load(objects[0]["data"]["trainops.yaml"])
    assert manifest["spec"]["eval"]["gates"][0]["metric"] == "val_loss"


def test_a_patch_that_breaks_the_job_is_refused(pinned: Project) -> None:
    write(pinned, CASES["batch"], patches=[{"target": {"kind": "Job"}, "merge": {"spec": {"backoffLimit": "none"}}}])
    out = pinned.trainops("eval", "render", "--image", IMAGE, "--run-id", "e1")
    assert out.code == 3
    assert "the rendered eval Job is invalid: eval/job.yaml Job spec.backoffLimit" in out.last_error_line


def test_submit_commits_the_eval_job_with_trailers(pinned: Project) -> None:
    write(pinned, CASES["volcano"])
    out = pinned.trainops("eval", "submit", "--image", IMAGE, "--run-id", "e7", "-o", "json")
    assert out.code == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["changed"] is True and result["path"] == "clusters/default-eval"
    git = pinned.root / ".trainops" / "gitops.git"
    listing = ["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", "main"]
    files = subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split()
    assert files == ["clusters/default-eval/manifest-configmap.yaml", "clusters/default-eval/volcano-job.yaml"]
    body = subprocess.run(
        ["git", "--git-dir", str(git), "log", "-1", "--format=%B", "main"], capture_output=True, text=True, check=True
    ).stdout
    assert "Trainops-Run: e7" in body and f"Trainops-Artifact: {result['checkpoint'].split('@')[1]}" in body
    again = pinned.trainops("eval", "submit", "--image", IMAGE, "--run-id", "e7", "-o", "json")
    assert json.loads(again.stdout)["changed"] is False


def test_with_argo_cd_the_eval_path_carries_its_own_application(pinned: Project) -> None:
    gitops = {"path": "clusters/dev", "argocd": {"project": "research", "destinationNamespace": "tiny-llm"}}
    write(pinned, CASES["volcano"], gitops=gitops)
    out = pinned.trainops("eval", "submit", "--image", IMAGE, "--run-id", "e8", "-o", "json")
    assert out.code == 0, out.stderr
    git = pinned.root / ".trainops" / "gitops.git"
    listing = ["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", "main"]
    files = subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split()
    assert "clusters/dev-eval/argocd/application.yaml" in files
    show = ["git", "--git-dir", str(git), "show", "main:clusters/dev-eval/argocd/application.yaml"]
    app = yaml.safe_load(subprocess.run(show, capture_output=True, text=True, check=True).stdout)
    source = app["spec"]["source"]
    # the Job and its ConfigMap at the path's top, not the Application itself
    assert (source["path"], source["directory"]) == ("clusters/dev-eval", {"include": "*.yaml"})
    assert app["metadata"]["name"] == "tiny-llm-eval-default" and app["spec"]["project"] == "research"
    assert app["spec"]["destination"]["namespace"] == "tiny-llm"
    assert app["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert validate_objects([app]) == []


@pytest.mark.parametrize("scheduler", ["local", "slurm"])
def test_no_eval_job_without_kubernetes(pinned: Project, scheduler: str) -> None:
    write(pinned, {"scheduler": scheduler, "gpusPerNode": 0})
    out = pinned.trainops("eval", "render", "--image", IMAGE, "--run-id", "e1")
    assert out.code == 3 and f"train.scheduler is {scheduler}" in out.last_error_line
