"""Rollout actions against a real bare GitOps repo: each one commit, the repo the only state."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from tests.gitops.helpers import git, hook, tip
from trainops_testing.cli import run, run_subprocess
from trainops_testing.projects import IMAGE, Project, make_project, push_model, write_variant

SERVE = "clusters/dev-serve"


def rollout(project: Project, *args: str) -> dict[str, object]:
    outcome = run("rollout", *project.cli(*args, "-o", "json"))
    assert outcome.code == 0, outcome.stderr
    data = json.loads(outcome.stdout)
    assert isinstance(data, dict)
    return data


def tree_id(project: Project, commit: str) -> str:
    return git("--git-dir", str(project.gitops), "rev-parse", f"{commit}:{SERVE}")


def state(project: Project) -> dict[str, object]:
    text = git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/trainops-rollout.json")
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def trailers(project: Project, commit: str) -> str:
    return git("--git-dir", str(project.gitops), "log", "-1", "--format=%(trailers:only,unfold)", commit)


def test_start_promote_promote_then_rollback_restores_the_earlier_tree_byte_for_byte(project: Project) -> None:
    first = rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    assert first["canary"] is None and first["weight"] == 0
    v1_tree = tree_id(project, str(first["commit"]))

    started = rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    assert started["weight"] == 10 and started["step"] == "1/3 10%"
    text = trailers(project, str(started["commit"]))
    assert "Trainops-Action: start" in text and "Trainops-Rollout-Step: 1/3 10%" in text
    assert "Trainops-Release: file://" in text and "model:v2@sha256:" in text
    route = git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/rollout.yaml")
    assert "setWeight: 10" in route

    assert rollout(project, "promote")["weight"] == 50
    # the Rollout's steps start again at the first when they change: it holds the previous
    # weight, the new weight follows, the header route only once the canary has pods
    steps = yaml.safe_load(git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/rollout.yaml"))
    steps = steps["spec"]["strategy"]["canary"]["steps"]
    assert [next(iter(step)) for step in steps] == ["setWeight", "setWeight", "setHeaderRoute", "analysis", "pause"]
    assert [step.get("setWeight") for step in steps[:2]] == [10, 50]
    assert rollout(project, "promote")["weight"] == 100
    done = rollout(project, "promote")
    assert done["canary"] is None and "model:v2@" in str(state(project)["stable"])

    back = rollout(project, "rollback")
    assert back["action"] == "rollback"
    assert tree_id(project, str(back["commit"])) == v1_tree  # the very tree that served v1
    assert "model:v1@" in str(state(project)["stable"])

    history = json.loads(run("rollout", *project.cli("history", "-o", "json")).stdout)
    actions = [item["action"] for item in history]
    assert actions == ["rollback", "promote", "promote", "promote", "start", "start"]
    assert [item["version"] for item in history][:2] == ["v1", "v2"]

    forward = rollout(project, "rollback", "--to", "v2")
    assert tree_id(project, str(forward["commit"])) == tree_id(project, str(done["commit"]))


def test_abort_mid_canary_returns_the_stable_tree(project: Project) -> None:
    first = rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    rollout(project, "promote")
    aborted = rollout(project, "abort")
    assert aborted["weight"] == 0 and aborted["canary"] is None
    assert tree_id(project, str(aborted["commit"])) == tree_id(project, str(first["commit"]))
    assert "Trainops-Action: abort" in trailers(project, str(aborted["commit"]))
    status = rollout(project, "status")
    assert status["canary"] is None and status["stable"]["version"] == "v1"  # type: ignore[index]


def test_two_operators_promoting_the_same_step_make_one_step(project: Project) -> None:
    rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    before = tip(project.gitops)
    # Each push waits in pre-receive until both operators have pushed: both computed from step 1.
    arrivals = project.root / "arrivals"
    arrivals.mkdir()
    hook(
        project.gitops,
        "pre-receive",
        f"#!/bin/sh\ntouch {arrivals}/$$\n"
        f"for i in $(seq 1 600); do [ $(ls {arrivals} | wc -l) -ge 2 ] && exit 0; sleep 0.05; done\nexit 0\n",
    )
    args = ["rollout", *project.cli("promote", "-o", "json")]
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda _: run_subprocess(args, cwd=project.root), range(2)))
    assert all(o.code == 0 for o in outcomes), [o.stderr for o in outcomes]
    results = [json.loads(o.stdout) for o in outcomes]
    assert sorted(r["stale"] for r in results) == [False, True]
    assert len(list(arrivals.iterdir())) == 2  # both really pushed at once
    after = tip(project.gitops)
    assert git("--git-dir", str(project.gitops), "rev-list", "--count", f"{before}..{after}") == "1"
    assert state(project)["step"] == 1  # one step, not two


def test_bad_input_is_one_line_and_commits_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    before = tip(project.gitops)
    cases = [
        (["rollout", "render", "--image", IMAGE], 3, "no release"),
        (["rollout", "start", "tiny-llm/model:v9", "--image", IMAGE], 4, "does not exist"),
        (["rollout", "start", "tiny-llm/checkpoints:step-1", "--image", IMAGE], 3, "not a model release"),
        (["rollout", "rollback", "--to", "v7"], 4, "never served"),
        (["rollout", "promote"], 5, "no canary"),
        (["rollout", "start", "tiny-llm/model:v1", "--image", IMAGE], 5, "already the stable"),
    ]
    for args, code, text in cases:
        outcome = run(*args, "-f", str(project.manifest))
        assert outcome.code == code, (args, outcome.stderr)
        assert len(outcome.stderr.strip().splitlines()) == 1 and text in outcome.stderr, outcome.stderr
        assert "Traceback" not in outcome.stderr
    assert tip(project.gitops) == before


def test_falling_weights_are_a_manifest_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    steps = [{"weight": 50}, {"weight": 10}]
    spec = {"registry": "file://.trainops/registry", "gitops": {"repo": "file://gitops.git", "path": "clusters/dev"}}
    falling = write_variant(project.root, {"spec": {**spec, "rollout": {"canary": {"steps": steps}}}}, name="f.yaml")
    outcome = run("rollout", "start", "tiny-llm/model:v1", "--image", IMAGE, "-f", str(falling))
    assert outcome.code == 3
    assert "must not decrease" in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1
    assert tip(project.gitops) is None


def test_lineage_down_lists_the_rollout_commits_that_served_a_release(project: Project) -> None:
    rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    started = rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    promoted = rollout(project, "promote", "--full")
    outcome = run("lineage", "tiny-llm/model:v2", "--down", "--format", "json", "-f", str(project.manifest))
    assert outcome.code == 0, outcome.stderr
    graph = json.loads(outcome.stdout)
    rollouts = {n["gitCommit"]: n for n in graph["nodes"] if n["kind"] == "rollout"}
    assert set(rollouts) == {started["commit"], promoted["commit"]}
    relations = sorted(e["relation"] for e in graph["edges"])
    assert relations == ["promote-full stable", "start 1/3 10%"]
    assert all(e["parent"] == graph["root"] for e in graph["edges"])
    text = run("lineage", "tiny-llm/model:v2", "--down", "-f", str(project.manifest)).stdout
    assert f"start 1/3 10%: rollout {SERVE}@{str(started['commit'])[:12]}" in text
    # v1 served as stable from its own start and, beside the canary, during v2's first step
    stable = json.loads(
        run("lineage", "tiny-llm/model:v1", "--down", "--format", "json", "-f", str(project.manifest)).stdout
    )
    assert sorted(e["relation"] for e in stable["edges"]) == ["start 1/3 10% (as stable)", "start stable"]


def test_gateway_api_weights_move_by_commits(tmp_path: Path) -> None:
    overlay = {"rollout": {"traffic": "gateway-api", "gateway": {"name": "inference", "namespace": "gateway"}}}
    project = make_project(tmp_path / "p", {"spec": overlay})
    rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)

    def weights() -> list[int]:
        route = yaml.safe_load(git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/httproute.yaml"))
        return [ref["weight"] for ref in route["spec"]["rules"][-1]["backendRefs"]]

    assert weights() == [100]
    rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    assert weights() == [90, 10]
    deployments = git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/deployment.yaml")
    assert "tiny-llm-canary" in deployments and "model:v2@" in deployments
    rollout(project, "promote")
    assert weights() == [50, 50]
    rollout(project, "promote", "--full")
    assert weights() == [100]
    deployments = git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/deployment.yaml")
    assert "tiny-llm-canary" not in deployments and "model:v2@" in deployments


def test_render_writes_the_stable_tree(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    outcome = run("rollout", *project.cli("render", "tiny-llm/model:v1", "--image", IMAGE, "--out", str(out)))
    assert outcome.code == 0, outcome.stderr
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert "rollout.yaml" in names and "trainops-rollout.json" in names and "argocd/application.yaml" in names
    assert "file:// registry" in outcome.stderr  # a cluster could not pull this release
    printed = run("rollout", *project.cli("render", "tiny-llm/model:v1", "--image", IMAGE)).stdout
    assert (out / "rollout.yaml").read_text() in printed
    assert tip(project.gitops) is None  # render commits nothing


def test_without_image_the_serve_image_built_for_head_is_used(project: Project) -> None:
    outcome = run("rollout", *project.cli("start", "tiny-llm/model:v1"))
    assert outcome.code == 3 and "not in a git repository" in outcome.stderr  # nothing to find it by
    git("init", "--quiet", cwd=project.root)
    (project.root / ".gitignore").write_text("*\n")
    git("add", "-f", "trainops.yaml", cwd=project.root)
    git("commit", "--quiet", "-m", "project", cwd=project.root)
    head = git("rev-parse", "HEAD", cwd=project.root)
    outcome = run("rollout", *project.cli("start", "tiny-llm/model:v1"))
    assert outcome.code == 4 and f"no serving image for commit {head[:12]}" in outcome.stderr
    push_model(project.root, project.manifest, f"tiny-llm/serve-vllm:{head}", "image", kind="other")
    started = rollout(project, "start", "tiny-llm/model:v1")
    assert started["stable"]["image"].startswith("file://")  # type: ignore[index]
    assert "tiny-llm/serve-vllm@sha256:" in started["stable"]["image"]  # type: ignore[index]


def test_promote_says_once_that_it_could_not_check_the_cluster(project: Project) -> None:
    """The example declares Argo CD and Argo Rollouts, and there is no kubeconfig at all (no
    --kubeconfig, $KUBECONFIG unset, no ~/.kube/config): promote commits, and says on stderr,
    once, that an abort by the controller could not be seen."""
    rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    for output in ("text", "json"):
        outcome = run("rollout", *project.cli("promote", "-o", output))
        assert outcome.code == 0, outcome.stderr
        assert outcome.stderr.count("could not check the cluster") == 1, outcome.stderr
        assert "~/.kube/config" in outcome.stderr
    # a manifest that declares neither controller has none to ask: no warning
    gitops = {"repo": "file://gitops.git", "branch": "main", "path": "clusters/dev", "argocd": None}
    plain = make_project(
        project.root.parent / "plain", {"spec": {"gitops": gitops, "rollout": {"traffic": "gateway-api"}}}
    )
    rollout(plain, "start", "tiny-llm/model:v1", "--image", IMAGE)
    rollout(plain, "start", "tiny-llm/model:v2", "--image", IMAGE)
    outcome = run("rollout", *plain.cli("promote"))
    assert outcome.code == 0 and "could not check" not in outcome.stderr, outcome.stderr


def test_the_controllers_step_index_maps_to_trainops_step(project: Project) -> None:
    """Each index Argo Rollouts can report over the steps of a commit, in trainops' terms: the
    commit of step 2 starts with step 1's weight (index 0 is still step 1)."""
    from trainops.manifest.load import load_manifest
    from trainops.rollout.context import serve_context
    from trainops.rollout.traffic import step_position

    rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    first = yaml.safe_load(git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/rollout.yaml"))
    assert rollout(project, "promote")["step"] == "2/3 50%"
    second = yaml.safe_load(git("--git-dir", str(project.gitops), "show", f"main:{SERVE}/rollout.yaml"))
    ctx = serve_context(load_manifest(project.manifest))
    steps = second["spec"]["strategy"]["canary"]["steps"]
    mapped = [step_position(ctx, steps, i) for i in [None, *range(len(steps) + 1)]]
    assert mapped == [
        ("2/3 50%", "not started"),
        ("1/3 10%", "holding the previous weight, then 2/3 50%"),
        ("2/3 50%", "setting the weight"),
        ("2/3 50%", "setting the A/B header route"),
        ("2/3 50%", "running the analysis"),
        ("2/3 50%", "paused until the next promote"),
        ("2/3 50%", "steps done"),
    ]
    first_steps = first["spec"]["strategy"]["canary"]["steps"]
    assert step_position(ctx, first_steps, 0) == ("1/3 10%", "setting the weight")  # no held weight before step 1
    assert step_position(ctx, [], None) == (None, None)  # stable: no canary steps
