"""`trainops validate --render [--crds DIR]`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from trainops.errors import InputError, ManifestError
from trainops.render.crds import VENDORED
from trainops_testing.cli import run
from trainops_testing.projects import EXAMPLE, write_variant


def test_validate_render_passes_on_the_example() -> None:
    out = run("validate", "-f", str(EXAMPLE), "--render")
    assert out.code == 0, out.stderr
    lines = out.stdout.splitlines()
    envs = "dev, dev-strict, dev-signed, slurm-local, prod, disagg"
    assert lines[0] == f"{EXAMPLE} is valid; environments checked: {envs}"
    volcano = (
        "volcano: 6 objects checked against the CRDs "
        "(Application 1, Job 1, PodMonitor 1, PrometheusRule 1, Queue 1, ConfigMap 1)"
    )
    assert f"render (base): {volcano}" in lines
    local = "train.scheduler is local: the job runs as a subprocess, there is nothing to render for a cluster"
    assert f"render (env dev): {local}" in lines
    assert "render (env slurm-local): slurm: train/sbatch.sh rendered (not Kubernetes objects)" in lines
    assert f"render (env prod): {volcano}" in lines
    serving = (
        "serving (vllm, argo-rollouts): 11 objects checked against the CRDs (AnalysisTemplate 1, Application 1, "
        "Rollout 1, HTTPRoute 1, PrometheusRule 1, ServiceMonitor 2, ConfigMap 1, Service 3)"
    )
    for where in ("base", "env dev", "env dev-strict", "env dev-signed", "env slurm-local", "env prod"):
        assert f"render ({where}): {serving}" in lines
    # the disaggregated environment: each release a prefill+decode pair, its pool and endpoint picker
    disagg = (
        "serving (vllm, gateway-api): 23 objects checked against the CRDs (Deployment 2, Application 1, "
        "DisaggregatedSet 2, HTTPRoute 1, InferencePool 2, PrometheusRule 1, ServiceMonitor 2, Role 2, "
        "RoleBinding 2, ConfigMap 1, Service 5, ServiceAccount 2)"
    )
    assert f"render (env disagg): {disagg}" in lines


def test_validate_render_json() -> None:
    out = run("validate", "-f", str(EXAMPLE), "--render", "-o", "json")
    assert out.code == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] is True
    trained = {None: "volcano", "dev": "local", "dev-strict": "local", "dev-signed": "local"}
    trained |= {"slurm-local": "slurm", "prod": "volcano", "disagg": "volcano"}
    assert [(r["env"], r["scheduler"].split(" ")[0]) for r in data["render"]] == [
        (env, what) for env, train in trained.items() for what in (train, "serving")
    ]
    assert data["render"][0]["counts"] == {
        "argoproj.io/v1alpha1 Application": 1,
        "batch.volcano.sh/v1alpha1 Job": 1,
        "monitoring.coreos.com/v1 PodMonitor": 1,
        "monitoring.coreos.com/v1 PrometheusRule": 1,
        "scheduling.volcano.sh/v1beta1 Queue": 1,
        "v1 ConfigMap": 1,
    }
    assert data["render"][0]["files"] == [
        "train/volcano-job.yaml",
        "tenants/volcano-queues.yaml",
        "argocd/application.yaml",
        "slo/prometheusrule.yaml",
        "train/podmonitor.yaml",
        "train/dashboard.yaml",
    ]
    serving = data["render"][1]
    assert serving["counts"]["argoproj.io/v1alpha1 Rollout"] == 1 and serving["objects"] == 11
    assert "clusters/dev-serve/rollout.yaml" in serving["files"]


def test_a_broken_patch_fails_with_its_path_in_one_line(tmp_path: Path) -> None:
    overlay = {"spec": {"patches": [{"target": {"kind": "Job"}, "merge": {"spec": {"maxRetyr": 5}}}]}}
    path = write_variant(tmp_path, overlay)
    out = run("validate", "-f", str(path), "--render")
    assert out.code == InputError.exit_code
    assert out.stderr.count("\n") == 1
    assert out.last_error_line.startswith(
        "Error: train/volcano-job.yaml: Job/tiny-llm-validate: spec.maxRetyr: unknown field"
    )
    assert "did you mean maxRetry?" in out.last_error_line


def test_problems_of_every_environment_are_listed(tmp_path: Path) -> None:
    overlay = {
        "spec": {"patches": [{"target": {"kind": "Queue"}, "merge": {"spec": {"weigth": 3}}}]},
        "environments": {"prod": {"registry": "oci://harbor.example.com/llm"}},
    }
    out = run("validate", "-f", str(write_variant(tmp_path, overlay)), "--render")
    assert out.code == InputError.exit_code
    problems = out.stderr.splitlines()[:-1]
    assert problems == [
        "tenants/volcano-queues.yaml: Queue/research: spec.weigth: unknown field: the API server would drop it "
        "without a word; did you mean weight?",
        "tenants/volcano-queues.yaml: Queue/research: spec.weigth: unknown field: the API server would drop it "
        "without a word; did you mean weight? (with --env prod)",
        "tenants/volcano-queues.yaml: Queue/research: spec.weigth: unknown field: the API server would drop it "
        "without a word; did you mean weight? (with --env disagg)",
    ]
    assert out.last_error_line.startswith("Error: 3 problems in the rendered objects")
    as_json = run("validate", "-f", str(write_variant(tmp_path, overlay)), "--render", "-o", "json")
    assert as_json.code == ManifestError.exit_code and json.loads(as_json.stdout)["ok"] is False


def test_a_patch_matching_nothing_fails(tmp_path: Path) -> None:
    overlay = {"spec": {"patches": [{"target": {"kind": "Deployment"}, "merge": {"metadata": {"labels": {"a": "b"}}}}]}}
    out = run("validate", "-f", str(write_variant(tmp_path, overlay)), "--render")
    assert out.code == InputError.exit_code
    serving = "AnalysisTemplate, Application, ConfigMap, HTTPRoute, PrometheusRule, Rollout, Service, ServiceMonitor"
    assert f"spec.patches[0]: no rendered Deployment to patch; serving renders {serving}" in out.last_error_line
    without_rollout = write_variant(tmp_path, {**overlay, "spec": {**overlay["spec"], "rollout": None, "slo": None}})
    out = run("validate", "-f", str(without_rollout), "--render")
    assert (
        "spec.patches[0]: no rendered Deployment to patch; rendered kinds: Application, Job, Queue"
        in out.last_error_line
    )


NO_SERVING = {"spec": {"rollout": None, "slo": None}}  # no serving objects, no SLO objects


def test_crds_dir_replaces_the_vendored_crds(tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    shutil.copy(VENDORED / "volcano-batch-job.yaml", crds)
    shutil.copy(VENDORED / "argocd-application.yaml", crds)
    out = run("validate", "-f", str(write_variant(tmp_path, NO_SERVING)), "--crds", str(crds))
    assert out.code == InputError.exit_code
    assert "Queue/research: no schema for scheduling.volcano.sh/v1beta1 Queue" in out.last_error_line
    shutil.copy(VENDORED / "volcano-scheduling-queue.yaml", crds)
    no_rollout = write_variant(tmp_path, NO_SERVING)
    assert run("validate", "-f", str(no_rollout), "--crds", str(crds)).code == 0
    # with spec.rollout and spec.slo, the serving objects need their CRDs too
    out = run("validate", "-f", str(write_variant(tmp_path)), "--crds", str(crds))
    assert out.code == InputError.exit_code
    assert "rollout.yaml: Rollout/tiny-llm: no schema for argoproj.io/v1alpha1 Rollout" in out.stderr


def test_validate_render_checks_the_serving_objects_strictly(tmp_path: Path) -> None:
    overlay = {"spec": {"patches": [{"target": {"kind": "Rollout"}, "merge": {"spec": {"replicaz": 2}}}]}}
    out = run("validate", "-f", str(write_variant(tmp_path, overlay)), "--render")
    assert out.code == InputError.exit_code
    assert out.last_error_line.startswith("Error: rollout.yaml: Rollout/tiny-llm: ")
    assert "replicaz" in out.last_error_line and len(out.stderr.strip().splitlines()) == 1
    as_json = json.loads(run("validate", "-f", str(write_variant(tmp_path, overlay)), "--render", "-o", "json").stdout)
    assert as_json["ok"] is False
    assert [r["scheduler"] for r in as_json["render"] if not r["ok"]] == ["serving (vllm, argo-rollouts)"]


def test_validate_without_render_does_not_render(tmp_path: Path) -> None:
    overlay = {"spec": {"patches": [{"target": {"kind": "Deployment"}, "merge": {}}]}}
    out = run("validate", "-f", str(write_variant(tmp_path, overlay)))
    assert out.code == 0 and "render (" not in out.stdout


def test_restart_pod_on_a_jobset_fails_at_the_field_in_one_line(tmp_path: Path) -> None:
    overlay = {
        "spec": {
            "patches": None,
            "train": {"scheduler": "kueue", "faultTolerance": {"action": "RestartPod"}, "topology": None},
        }
    }
    out = run("validate", "-f", str(write_variant(tmp_path, overlay)), "--render")
    assert out.code == InputError.exit_code
    assert out.stderr.count("\n") == 1
    assert out.last_error_line.startswith("Error: trainops.yaml: train.faultTolerance.action: RestartPod restarts one")
    assert "RestartTask (only the failed child Job)" in out.last_error_line
