"""`trainops run` on tiny-llm: stages keyed by content, cached in the registry, resumed
after a failure, and bad windows refused before anything runs."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.pipeline.flow import Project, base_manifest, by_name, make_project
from trainops.errors import InputError
from trainops.pipeline.cache import A_STAGE_KEY, A_STAGE_NAME, record_tag
from trainops.pipeline.graph import Node, order
from trainops.registry.listing import list_repository
from trainops.registry.store import resolve


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


def _lineage(project: Project, ref: str) -> dict[str, object]:
    with project.registries() as regs:
        parsed = resolve(regs, ref=regs.ref(ref)).parsed
        return json.loads(parsed.annotations["dev.trainops.lineage"])  # type: ignore[no-any-return]


def test_first_run_then_everything_cached(project: Project) -> None:
    done = project.trainops("run", "-o", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    events = [line for line in done.stderr.splitlines() if line.startswith("trainops: [")]
    assert events[0].startswith("trainops: [image] skipped: no container engine")  # one line per event off a TTY
    assert "trainops: [train] start: runs (never ran: no record in the registry)" in events
    assert any(e.startswith("trainops: [train] note: pushed step-000100") for e in events)
    first = by_name(json.loads(done.stdout))
    image, train, ckpt = first["image"], first["train"], first["checkpoint"]
    assert image["status"] == "skipped"
    assert "no container engine" in image["why"] and "layer builder needs image.base" in image["why"]
    environment = image["outputs"][0]
    assert environment["name"] == "environment" and environment["ref"] is None
    assert train["status"] == "ran" and ckpt["status"] == "ran"
    newest = train["outputs"][0]
    assert newest["ref"].startswith("tiny-llm/checkpoints:step-200@")
    assert ckpt["outputs"][0]["digest"] == newest["digest"]  # eval.checkpoint defaults to latest

    # the checkpoint records the environment the run ran in, and no image digest
    lineage = _lineage(project, newest["ref"])
    assert "imageDigest" not in lineage
    assert lineage["environment"]["digest"] == environment["digest"]  # type: ignore[index]
    assert lineage["environment"]["python"] == ".".join(map(str, sys.version_info[:3]))  # type: ignore[index]
    shown = project.trainops("registry", "show", newest["ref"])  # for people: one short line
    assert shown.returncode == 0, shown.stderr
    python = next(line for line in shown.stdout.splitlines() if line.startswith("  python:"))
    assert python.endswith(f"packages ({environment['digest'][:19]})") and len(python) <= 80

    # the stage record: found by its key, names the key and the artifact
    with project.registries() as regs:
        record = resolve(regs, ref=regs.ref("tiny-llm/stages").with_tag(record_tag("train", train["key"])))
        assert record.parsed.annotations[A_STAGE_KEY] == train["key"]
        assert record.parsed.annotations[A_STAGE_NAME] == "train"
        assert [p.digest for p in record.parsed.lineage().parents] == [newest["digest"]]

    second = by_name(project.run_json())
    assert second["train"]["status"] == "cached" and second["checkpoint"]["status"] == "cached"
    assert second["train"]["key"] == train["key"]
    assert second["checkpoint"]["outputs"] == ckpt["outputs"]

    dry = project.trainops("run", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = {line.split()[0]: line for line in dry.stdout.splitlines() if line.strip()}
    assert lines["train"].count("cached") == 1 and lines["checkpoint"].count("cached") == 1  # said once
    events = [line for line in dry.stderr.splitlines() if line.startswith("trainops: [train] ")]
    assert events == [f"trainops: [train] cached: {second['train']['outputs'][0]['ref']}"]
    assert "skipped" in lines["image"]


def test_a_code_change_reruns_training_and_says_why(project: Project) -> None:
    project.run_json()
    with (project.root / "tiny_llm" / "train.py").open("a", encoding="utf-8") as fh:
        fh.write("\n# a change to the training code\n")
    dry = by_name(project.run_json("--dry-run"))
    assert dry["train"]["status"] == "runs"
    assert dry["train"]["why"] == "changed: source"
    assert dry["checkpoint"]["status"] == "runs" and "after train" in dry["checkpoint"]["why"]
    # a docs change outside the code feeds no key
    with (project.root / "tiny_llm" / "train.py").open("r+", encoding="utf-8") as fh:
        text = fh.read().replace("\n# a change to the training code\n", "")
        fh.seek(0)
        fh.truncate()
        fh.write(text)
    (project.root / "README.md").write_text("# tiny-llm, documented\n", encoding="utf-8")
    again = by_name(project.run_json("--dry-run"))
    assert again["train"]["status"] == "cached"


def test_a_failed_training_resumes_at_the_failed_stage(project: Project, tmp_path: Path) -> None:
    marker = tmp_path / "fail-once"
    marker.write_text("", encoding="utf-8")
    wrapper = (
        "import os, runpy, sys\n"
        "sys.argv = ['tiny_llm.train']\n"
        "try:\n    runpy.run_module('tiny_llm.train', run_name='__main__')\n"
        "except SystemExit as stop:\n    assert not stop.code, stop.code\n"
        f"sys.exit(3 if os.path.exists({str(marker)!r}) else 0)\n"
    )
    doc = base_manifest()
    doc["spec"]["train"]["command"] = [sys.executable, "-c", wrapper]
    project.write_manifest(doc)
    failed = project.trainops("run", "-o", "json")
    assert failed.returncode == 9, failed.stderr[-2000:]
    assert failed.stderr.splitlines()[-1].startswith("Error: train.command exited 3 (run ")
    result = by_name(json.loads(failed.stdout))
    assert result["train"]["status"] == "failed" and "checkpoint" not in result
    # no record of a stage that failed (image was skipped, so the records repository is not even there)
    assert not (project.root / ".trainops" / "registry" / "tiny-llm" / "stages").exists()
    with project.registries() as regs:
        pushed = [t.tag for t in list_repository(regs, ref=regs.ref("tiny-llm/checkpoints")).tags]
    assert "step-200" in pushed  # what finished before the failure is whole in the registry

    marker.unlink()
    resumed = by_name(project.run_json())
    assert resumed["train"]["status"] == "ran"
    assert resumed["train"]["key"] == result["train"]["key"]  # the same stage, resumed
    assert resumed["train"]["details"]["pushed"] == 0  # the trainer found step 200 done
    assert resumed["train"]["outputs"][0]["ref"].startswith("tiny-llm/checkpoints:step-200@")
    assert resumed["checkpoint"]["status"] == "ran"


def test_from_needs_the_earlier_stages_cached(project: Project) -> None:
    done = project.trainops("run", "--from", "checkpoint")
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        "Error: --from checkpoint: stage train has no output in the registry for its current inputs "
        "(never ran: no record in the registry)"
    )
    assert not (project.root / ".trainops" / "registry" / "tiny-llm" / "stages").exists()
    assert not (project.root / ".trainops" / "runs").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--from", "deploy"), "Error: --from deploy: no such stage; the stages are image, train, checkpoint"),
        (("--to", "eval"), "Error: --to eval: the manifest defines no eval stage; it has image, train, checkpoint"),
        (("--from", "checkpoint", "--to", "train"), "Error: --from checkpoint comes after --to train"),
    ],
)
def test_bad_windows_are_one_line_usage_errors(project: Project, args: tuple[str, ...], message: str) -> None:
    done = project.trainops("run", *args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(message), done.stderr
    assert not (project.root / ".trainops").exists()


def test_a_cycle_in_the_stage_graph_is_named() -> None:
    nodes = {"a": Node("a", ("c",)), "b": Node("b", ("a",)), "c": Node("c", ("b",)), "d": Node("d", ())}
    with pytest.raises(InputError, match=r"the stage graph has a cycle: a → c → b → a"):
        order(nodes)
    assert [n.name for n in order({"x": Node("x", ("y",)), "y": Node("y", ())})] == ["y", "x"]


def test_a_named_input_that_is_missing_stops_the_run_before_anything_runs(project: Project) -> None:
    doc = base_manifest()
    doc["spec"]["eval"] = {"command": ["true"], "checkpoint": "tiny-llm/checkpoints:step-999"}
    project.write_manifest(doc)
    done = project.trainops("run", "--to", "checkpoint")
    assert done.returncode == 4
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        "Error: stage checkpoint needs eval.checkpoint tiny-llm/checkpoints:step-999, which is not in its registry"
    )
    assert not (project.root / ".trainops" / "runs").exists()  # training did not start


def test_on_a_terminal_progress_is_one_live_table(project: Project) -> None:
    import os
    import pty
    import subprocess

    from tests.pipeline.flow import TRAINOPS

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [*TRAINOPS, "run", "--dry-run", "-o", "json"],
            cwd=project.root,
            env=project.env(TERM="xterm", COLUMNS="100"),
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
            check=False,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert done.returncode == 0
    assert "trainops: [" not in screen  # not the line-per-event form
    assert "stage" in screen and "skipped" in screen and "planned" in screen
    assert json.loads(done.stdout)["dryRun"] is True  # stdout stays the result alone


def _with_eval_and_release(gate: float) -> dict[str, object]:
    doc = base_manifest()
    doc["spec"]["eval"] = {
        "command": [sys.executable, "-m", "tiny_llm.eval"],
        "checkpoint": "latest",
        "gates": [{"metric": "val_loss", "op": "<=", "value": gate}],
    }
    doc["spec"]["release"] = {"source": "latest", "tag": "v1-step-{step}"}
    return doc


def test_eval_and_release_run_then_are_cached(project: Project) -> None:
    project.write_manifest(_with_eval_and_release(gate=9.0))
    first = by_name(project.run_json())
    assert [first[s]["status"] for s in ("train", "checkpoint", "eval", "release")] == ["ran"] * 4
    report = first["eval"]["outputs"][0]
    assert report["name"] == "report" and report["ref"].endswith(report["digest"])
    assert first["eval"]["details"]["passed"] is True
    model = first["release"]["outputs"][0]
    assert model["ref"].startswith("tiny-llm/model:v1-step-200@")
    assert first["release"]["details"]["checkpoint"].endswith(first["checkpoint"]["outputs"][0]["digest"])
    second = by_name(project.run_json())
    assert {name: s["status"] for name, s in second.items()} == {
        "image": "skipped",
        "train": "cached",
        "checkpoint": "cached",
        "eval": "cached",
        "release": "cached",
    }
    assert second["release"]["outputs"] == first["release"]["outputs"]


def test_a_failed_gate_stops_the_flow_with_exit_8_and_is_not_cached(project: Project) -> None:
    project.write_manifest(_with_eval_and_release(gate=0.01))
    done = project.trainops("run", "-o", "json")
    assert done.returncode == 8, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].startswith("Error: ")
    stages = by_name(json.loads(done.stdout))
    assert stages["eval"]["status"] == "failed" and "release" not in stages
    again = by_name(project.run_json("--dry-run"))
    assert again["train"]["status"] == "cached"
    assert again["eval"]["status"] == "runs"  # evaluated again next time: a failed gate is never cached
    assert not (project.root / ".trainops" / "registry" / "tiny-llm" / "model").exists()


def test_an_interrupted_run_leaves_finished_artifacts_whole_and_no_record(project: Project, tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    from tests.pipeline.flow import TRAINOPS

    doc = base_manifest(max_steps=3000)
    project.write_manifest(doc)
    log = tmp_path / "run.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*TRAINOPS, "run", "-o", "json"], cwd=project.root, env=project.env(), stdout=subprocess.PIPE, stderr=err
        )
        deadline = time.monotonic() + 120
        while "pushed step-000100" not in log.read_text(encoding="utf-8"):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(encoding="utf-8")[-2000:]
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)  # passed on to the trainer, which checkpoints and stops
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, log.read_text(encoding="utf-8")[-2000:]  # Ctrl-C, as shells report it
    stages = by_name(json.loads(out))
    assert stages["train"]["status"] == "failed" and "stopped on SIGINT" in stages["train"]["error"]
    assert not (project.root / ".trainops" / "registry" / "tiny-llm" / "stages").exists()  # no record
    pulled = project.trainops("ckpt", "pull", "--latest", str(tmp_path / "pulled"))  # whole: every byte verified
    assert pulled.returncode == 0, pulled.stderr
    latest = project.trainops("ckpt", "latest")
    assert latest.returncode == 0, latest.stderr
    reached = int(re.search(r":step-(\d+)@", latest.stdout).group(1))  # type: ignore[union-attr]
    # Finish sooner this time: 100 steps past where the interrupted run saved.
    doc["spec"]["train"]["env"]["TRAINOPS_MAX_STEPS"] = str(reached + 100)
    project.write_manifest(doc)
    resumed = by_name(project.run_json())
    assert resumed["train"]["status"] == "ran" and resumed["train"]["details"]["restored"] is None
    assert resumed["train"]["outputs"][0]["ref"].startswith(f"tiny-llm/checkpoints:step-{reached + 100}@")


def test_the_flow_ends_in_a_canary_commit_and_reruns_cached(project: Project, tmp_path: Path) -> None:
    import subprocess

    doc = _with_eval_and_release(gate=9.0)
    doc["spec"]["rollout"] = {  # type: ignore[index]
        "engine": "vllm",
        "traffic": "argo-rollouts",
        "canary": {"steps": [{"weight": 10, "pause": "5m"}, {"weight": 100}]},
    }
    project.write_manifest(doc)
    serve = tmp_path / "serve-image"
    serve.mkdir()
    (serve / "rootfs.txt").write_text("a serving image stands here\n", encoding="utf-8")
    assert project.trainops("push", str(serve), "tiny-llm/serve:v1").returncode == 0
    first = by_name(project.run_json("--serve-image", "tiny-llm/serve:v1"))
    assert first["rollout"]["status"] == "ran"
    commit = first["rollout"]["details"]["commit"]
    log = subprocess.run(
        ["git", "--git-dir", str(project.root / ".trainops" / "gitops.git"), "log", "--format=%H", "main"],
        capture_output=True,
        text=True,
        env=project.env(),
        check=True,
    ).stdout.split()
    assert log[0] == commit
    second = by_name(project.run_json("--serve-image", "tiny-llm/serve:v1"))
    assert second["rollout"]["status"] == "cached"
    again = subprocess.run(
        ["git", "--git-dir", str(project.root / ".trainops" / "gitops.git"), "log", "--format=%H", "main"],
        capture_output=True,
        text=True,
        env=project.env(),
        check=True,
    ).stdout.split()
    assert again == log  # nothing committed twice
