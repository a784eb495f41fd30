"""A push starts the training path: a project's bare git remote whose `post-receive` hook runs
`trainops ci` for the pushed range, the training job it commits synced by Argo CD and placed
by the Volcano scheduler. One home for tests/argo/test_push_train.py and scripts/cluster_job.py.

The project is examples/tiny-llm's manifest (Volcano, 2 nodes × 8 GPUs, topology inside one
rack, its tenants' Queues) with the registry at an absolute path (the hook's workspace is a
clone elsewhere), the GitOps repository served to Argo CD over HTTP, a pinned training image
(no image build here) and the serving overlay of the canary tests.

The hook stands in for a CI runner: it checks the pushed commit out into the runner's
workspace and starts `trainops ci --since OLD --until NEW` detached (a CI server queues the
job; `git push` returns), writing its pid, JSON result and log under `runs/`. The kwok pods
train nothing, so the run's train stage waits for checkpoints that never come: `stop_ci`
ends it, by the pid the hook wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.argo_live import NAMESPACE, serving_overlay
from trainops_testing.projects import push_model, write_variant
from trainops_testing.services import bare_git_repo, git_env

REPO = Path(__file__).resolve().parents[1]
TRAIN_IMAGE = "tiny-llm/image:v1"
TRAIN_APP = "clusters/dev/argocd/application.yaml"  # the training path's Application, as trainops renders it
EVAL_APP = "clusters/dev-eval/argocd/application.yaml"  # the eval path's (eval submit)
HOOK = """#!/bin/sh
# post-receive: for each push of main, check the pushed commit out into the runner's
# workspace and start `trainops ci` on git's own range, detached (a CI server queues the run).
unset GIT_DIR GIT_WORK_TREE GIT_QUARANTINE_PATH
while read old new ref; do
  [ "$ref" = refs/heads/main ] || continue
  [ -d "{work}/.git" ] || git clone -q "{origin}" "{work}" || exit 1
  git -C "{work}" fetch -q origin && git -C "{work}" checkout -q -f "$new" || exit 1
  cd "{work}" && PYTHONPATH="{pythonpath}" setsid "{python}" -m trainops.cli.main ci \\
    --since "$old" --until "$new" -o json > "{runs}/ci-$new.json" 2> "{runs}/ci-$new.log" < /dev/null &
  echo $! > "{runs}/ci-$new.pid"
  echo "post-receive: trainops ci --since $old --until $new started (log {runs}/ci-$new.log)"
done
"""


@dataclass
class PushProject:
    """The user's project (a git repository), its bare remote with the hook, the runner's
    workspace and the hook's output directory."""

    root: Path
    origin: Path
    work: Path
    runs: Path
    env: dict[str, str]

    @property
    def manifest(self) -> Path:
        return self.root / "trainops.yaml"

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.root, env=self.env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout.strip()

    def cli(self, *args: str) -> list[str]:
        return [*args, "-f", str(self.manifest)]

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def push(self) -> str:
        """`git push origin main`; what the hook said (git relays it on stderr)."""
        done = subprocess.run(["git", "push", "origin", "main"], cwd=self.root, env=self.env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"git push: {done.stderr.strip()}")
        return "\n".join(line for line in done.stderr.splitlines() if "post-receive" in line)

    def ci_pids(self) -> list[int]:
        return [int(p.read_text()) for p in sorted(self.runs.glob("ci-*.pid")) if p.read_text().strip()]

    def ci_log(self, new: str) -> str:
        path = self.runs / f"ci-{new}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def stop_ci(self) -> None:
        """End the ci runs the hook started (each leads its own session: its group goes)."""
        for pid in self.ci_pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)


def push_project(root: Path, *, gitops: str, python: str = sys.executable) -> PushProject:
    """The project with its models and training image, its first commit on the remote, and
    the hook installed (the next push runs ci)."""
    registry = root / "registry"
    overlay = serving_overlay(gitops)
    spec = overlay["spec"]
    spec["registry"] = f"file://{registry}"
    spec["gitops"]["argocd"] = {"project": "research", "destinationNamespace": NAMESPACE}
    spec["image"] = None  # no image build here: the job runs a pushed image
    spec["train"] = {"image": TRAIN_IMAGE, "datasets": None}
    project_dir = root / "project"
    manifest = write_variant(project_dir, overlay)  # None removes what the example sets
    for tag, content in (("v1", '{"v": 1}'), ("v2", '{"v": 2}')):
        push_model(project_dir, manifest, f"tiny-llm/model:{tag}", content)
    push_model(project_dir, manifest, TRAIN_IMAGE, '{"image": "stands in for a training image"}', kind="other")
    env = git_env(dict(os.environ))
    project = PushProject(project_dir, bare_git_repo(root / "project.git"), root / "runner", root / "runs", env)
    project.runs.mkdir()
    (project_dir / ".gitignore").write_text(".trainops/\n", encoding="utf-8")
    project.git("init", "-q", "-b", "main")
    project.commit("tiny-llm: train on Volcano, serve through Argo Rollouts")
    project.git("remote", "add", "origin", str(project.origin))
    project.git("push", "-q", "origin", "main")  # the project's history, from before CI was set up
    hook = project.origin / "hooks" / "post-receive"
    hook.write_text(HOOK.format(work=project.work, origin=project.origin, runs=project.runs, python=python,
                                pythonpath=REPO), encoding="utf-8")  # fmt: skip
    hook.chmod(0o755)
    return project


def change_training(project: PushProject, *, steps: int) -> str:
    """The change a user pushes: train.env's step count (spec.train changes: ci runs train onwards)."""
    data = yaml.safe_load(project.manifest.read_text(encoding="utf-8"))
    data["spec"]["train"].setdefault("env", {})["TRAINOPS_MAX_STEPS"] = str(steps)
    project.manifest.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return project.commit(f"train {steps} steps")


def gitops_file(url: str, path: str, *, scratch: Path) -> str | None:
    """A file of the GitOps repository's main branch as served, checked out in `scratch`
    (None until it is there)."""

    def git(*args: str) -> bool:
        return subprocess.run(["git", "-C", str(scratch), *args], env=git_env(), capture_output=True).returncode == 0

    if not (scratch / ".git").exists():
        subprocess.run(["git", "init", "-q", str(scratch)], check=True, env=git_env())
    if not (git("fetch", "-q", url, "main") and git("checkout", "-q", "-f", "FETCH_HEAD")):
        return None
    target = scratch / path
    return target.read_text(encoding="utf-8") if target.is_file() else None


def gitops_commit(scratch: Path) -> tuple[str, dict[str, str]]:
    """The commit `gitops_file` checked out last, and its trailers."""
    done = subprocess.run(["git", "-C", str(scratch), "log", "-1", "--format=%H%n%(trailers:only,unfold)"],
                          capture_output=True, text=True, check=True, env=git_env())  # fmt: skip
    sha, *lines = done.stdout.strip().splitlines()
    return sha, dict(line.split(": ", 1) for line in lines if ": " in line)


def bootstrap_train(argo: ArgoStack, application: str) -> str:
    """What a user does once: apply the training path's Application (its AppProject first);
    the Application's name."""
    doc: dict[str, Any] = next(yaml.safe_load_all(application))
    argo.project(doc["spec"]["project"])
    argo.apply(application)
    return str(doc["metadata"]["name"])


def _get(argo: ArgoStack, *what: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(argo.kubectl_run("get", "-n", namespace, *what, "-o", "json"))
    return data


def app_status(argo: ArgoStack, app: str) -> dict[str, Any]:
    """The Application's status (sync, health) as Argo CD wrote it."""
    status: dict[str, Any] = _get(argo, f"application/{app}", namespace="argocd").get("status") or {}
    return status


def volcano_jobs(argo: ArgoStack) -> dict[str, dict[str, str]]:
    """Volcano job → its labels, in the training namespace."""
    return {
        j["metadata"]["name"]: j["metadata"].get("labels") or {} for j in _get(argo, "jobs.batch.volcano.sh")["items"]
    }


def podgroup_queues(argo: ArgoStack) -> list[str]:
    return [pg["spec"].get("queue", "") for pg in _get(argo, "podgroups.scheduling.volcano.sh")["items"]]


def all_bound(argo: ArgoStack, job: str, count: int) -> dict[str, str] | None:
    """pod → node once all `count` pods of the job are bound; else None."""
    pods = _get(argo, "pods", "-l", f"volcano.sh/job-name={job}")["items"]
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}
    schedulers = {p["spec"].get("schedulerName") for p in pods}
    return nodes if len(nodes) == count and all(nodes.values()) and schedulers == {"volcano"} else None


def priority_class(argo: ArgoStack, name: str = "research-normal") -> None:
    """The PriorityClass the example's job names (an administrator's, not trainops' render)."""
    argo.apply(f"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: 1000\n")
