"""A push to the project's git remote trains on the cluster: the remote's post-receive hook
runs `trainops ci` for the pushed range, ci commits the Volcano job and the training path's
Application to the GitOps repo, Argo CD syncs the path and the Volcano scheduler binds the
whole gang on distinct nodes (all read from the API server). trainops_testing/argo_push.py says how
the hook stands in for a CI server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.argo_live import NAMESPACE, wait
from trainops_testing.argo_push import (
    EVAL_APP,
    TRAIN_APP,
    PushProject,
    all_bound,
    app_status,
    bootstrap_train,
    change_training,
    gitops_commit,
    gitops_file,
    podgroup_queues,
    priority_class,
    push_project,
    volcano_jobs,
)
from trainops_testing.cli import run
from trainops_testing.projects import push_model


@pytest.fixture
def pushed(argo: ArgoStack, gitops_http: str, tmp_path: Path) -> Iterator[PushProject]:
    priority_class(argo)
    project = push_project(tmp_path, gitops=gitops_http)
    yield project
    project.stop_ci()
    argo.kubectl_run("delete", "queues.scheduling.volcano.sh", "research", "--ignore-not-found", "--wait=false")


def test_a_push_runs_ci_argo_cd_syncs_the_job_and_volcano_binds_it(
    argo: ArgoStack, gitops_http: str, pushed: PushProject, tmp_path: Path
) -> None:
    new = change_training(pushed, steps=400)
    said = pushed.push()
    assert f"--until {new} started" in said, said
    scratch = tmp_path / "gitops"
    application = wait(lambda: gitops_file(gitops_http, TRAIN_APP, scratch=scratch), timeout=180,
                       what=f"ci's GitOps commit (ci's log: {pushed.runs})")  # fmt: skip
    commit, trailers = gitops_commit(scratch)
    assert trailers["Trainops-Commit"] == new  # ci committed the job of the pushed commit
    run_id = trailers["Trainops-Run"]
    assert f"[train] note: submitted run {run_id}" in pushed.ci_log(new)
    assert "before train" in pushed.ci_log(new)  # ci started at train: the push changed spec.train

    app = bootstrap_train(argo, application)  # once; from now on git alone drives the cluster
    status = wait(lambda: (s := app_status(argo, app)).get("sync", {}).get("status") == "Synced" and s,
                  timeout=180, what=f"Application {app} Synced", argo=argo)  # fmt: skip
    assert status["sync"]["revision"] == commit
    jobs = wait(lambda: volcano_jobs(argo), timeout=60, what=f"the Volcano job in {NAMESPACE}", argo=argo)
    ((job, labels),) = jobs.items()
    assert labels["trainops.dev/run-id"] == run_id
    pods = wait(lambda: all_bound(argo, job, 2), timeout=120, what=f"{job}'s 2 pods bound by Volcano", argo=argo)
    assert len(set(pods.values())) == 2, pods  # the gang, one pod per node
    assert podgroup_queues(argo) == ["research"]  # in the tenant's Queue, which Argo CD synced from the path too

    # eval submit: the eval Job goes to <path>-eval with that path's own Application; once
    # applied, Argo CD syncs the Job and Volcano binds it in the queue the training synced
    push_model(pushed.root, pushed.manifest, "tiny-llm/checkpoints:step-1", '{"c": 1}', kind="checkpoint")
    submitted = run("eval", "submit", "tiny-llm/checkpoints:step-1", "-f", str(pushed.manifest))
    assert submitted.code == 0, submitted.stderr
    eval_app = wait(lambda: gitops_file(gitops_http, EVAL_APP, scratch=scratch), timeout=60,
                    what="the eval path's Application in the GitOps repo")  # fmt: skip
    eval_commit, _ = gitops_commit(scratch)
    name = bootstrap_train(argo, eval_app)
    assert name != app
    status = wait(lambda: (s := app_status(argo, name)).get("sync", {}).get("status") == "Synced" and s,
                  timeout=180, what=f"Application {name} Synced", argo=argo)  # fmt: skip
    assert status["sync"]["revision"] == eval_commit
    evals = wait(lambda: {j: v for j, v in volcano_jobs(argo).items() if j != job}, timeout=60,
                 what="the eval's Volcano job", argo=argo)  # fmt: skip
    ((eval_job, eval_labels),) = evals.items()
    assert eval_labels["app.kubernetes.io/component"] == "eval"
    wait(lambda: all_bound(argo, eval_job, 1), timeout=120, what=f"{eval_job}'s pod bound by Volcano", argo=argo)
