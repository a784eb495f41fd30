"""`trainops eval run` and `eval ls` on a file:// registry with a stand-in eval command:
the contract, gates (exit 8, report pushed with verdict failed), and every way the command
can fail (exit 9, one line naming the problem, nothing pushed)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.eval.conftest import PYTHON, Project
from trainops.eval.report import REPORT_MEDIA_TYPE
from trainops.registry import media
from trainops.registry.store import resolve

EVALCMD = Path(__file__).resolve().parent / "evalcmd.py"


def setup(project: Project, mode: str = "ok", gates: list[dict[str, Any]] | None = None, **eval_extra: Any) -> str:
    shutil.copy(EVALCMD, project.root / "evalcmd.py")
    ref = project.push_checkpoint(3, metrics={"loss": 2.0})
    project.write(
        {
            "image": {"template": "train-pytorch"},
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [PYTHON, "-c", "pass"],
                "checkpoint": {"keep": {"last": 3, "best": 1, "metric": "loss", "mode": "min"}},
            },
            "eval": {
                "command": [PYTHON, "evalcmd.py", mode],
                "env": {"EXTRA": "from-eval-env"},
                "gates": gates if gates is not None else [{"metric": "score", "op": ">=", "value": 0.5}],
                **eval_extra,
            },
        },
        environments={"strict": {"eval": {"gates": [{"metric": "score", "op": ">=", "value": 0.95}]}}},
    )
    return ref


def reports(project: Project, ref: str) -> list[Any]:
    with project.registries() as regs:
        found = resolve(regs, ref=regs.ref(ref))
        return regs.backend(found.ref).referrers(found.ref.repository, found.manifest.digest)


def test_passing_gates_push_a_report_whose_subject_is_the_checkpoint(local_project: Project) -> None:
    ref = setup(local_project)
    out = local_project.trainops("eval", "run", "-o", "json")
    assert out.code == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["checkpoint"] == ref
    assert result["metrics"] == {"score": 0.9, "loss": 1.5, "step": 3.0}
    assert result["gates"] == [{"metric": "score", "op": ">=", "value": 0.5, "actual": 0.9, "passed": True}]
    assert result["passed"] is True
    seen = json.loads((local_project.root / "seen.json").read_text())
    assert not seen.pop("checkpoint_dir").startswith(str(local_project.root))  # pulled into a scratch directory
    assert seen == {
        "checkpoint_files": ["model.safetensors", "optimizer.safetensors", "trainer_state.json"],
        "ref": ref,
        "output_exists_before": False,
        "extra": "from-eval-env",
    }
    with local_project.registries() as regs:
        report = resolve(regs, ref=regs.ref(result["report"]))
        checkpoint = resolve(regs, ref=regs.ref(ref))
        assert report.parsed.subject is not None and report.parsed.subject.digest == checkpoint.manifest.digest
        assert report.parsed.artifact_type == media.ARTIFACT_TYPES["eval"]
        assert [layer.media_type for layer in report.parsed.layers] == [REPORT_MEDIA_TYPE]
        parents = report.parsed.lineage().parents
        assert [(p.digest, p.relation) for p in parents] == [(checkpoint.manifest.digest, "evaluated")]
        with regs.backend(report.ref).open_blob(report.ref.repository, report.parsed.layers[0].digest) as fh:
            body = json.loads(fh.read())
    assert body["passed"] is True and body["command"] == [PYTHON, "evalcmd.py", "ok"]
    assert body["started"] <= body["ended"] and body["checkpoint"] == ref
    listed = local_project.trainops("eval", "ls", "step-3", "-o", "json")
    assert listed.code == 0, listed.stderr
    assert [(e["digest"], e["passed"]) for e in json.loads(listed.stdout)] == [(report.manifest.digest, True)]


@pytest.mark.parametrize(
    ("image", "recorded"),
    [
        (f"registry.example:5000/team/train:v1@sha256:{'ab' * 32}", f"sha256:{'ab' * 32}"),
        ("registry.example:5000/team/train:v1", None),  # not pinned: the checkpoint's (none here)
        ("registry.example:5000/team/train@sha256:short", None),  # not a digest: nothing made up
    ],
)
def test_the_report_lineage_records_the_digest_of_a_pinned_image(
    local_project: Project, image: str, recorded: str | None
) -> None:
    setup(local_project)
    out = local_project.trainops("eval", "run", "--image", image, "-o", "json")
    assert out.code == 0, out.stderr
    with local_project.registries() as regs:
        report = resolve(regs, ref=regs.ref(json.loads(out.stdout)["report"]))
    assert report.parsed.lineage().image_digest == recorded


def test_text_output_is_a_table_of_gates(local_project: Project) -> None:
    setup(local_project)
    out = local_project.trainops("eval", "run")
    assert out.code == 0, out.stderr
    assert "score" in out.stdout and ">= 0.5" in out.stdout and "pass" in out.stdout
    assert "METRIC  GATE" in out.stdout  # the one table style
    assert max(len(line) for line in out.stdout.splitlines()) <= 80


def test_a_gate_tightened_by_an_overlay_fails_with_exit_8_and_a_failed_report(local_project: Project) -> None:
    ref = setup(local_project)
    out = local_project.trainops("eval", "run", "--env", "strict", "-o", "json")
    assert out.code == 8, out.stderr
    assert out.last_error_line.startswith("Error: eval of ") and "score >= 0.95: actual 0.9" in out.last_error_line
    result = json.loads(out.stdout)
    assert result["passed"] is False and result["gates"][0]["passed"] is False
    listed = json.loads(local_project.trainops("eval", "ls", ref, "-o", "json").stdout)
    assert [(e["digest"], e["passed"]) for e in listed] == [(result["report"].split("@")[1], False)]


def test_a_gate_on_a_missing_metric_fails_naming_it(local_project: Project) -> None:
    setup(local_project, gates=[{"metric": "accuracy", "op": ">", "value": 0.1}])
    out = local_project.trainops("eval", "run", "-o", "json")
    assert out.code == 8
    assert "metric 'accuracy' is missing" in out.last_error_line
    assert json.loads(out.stdout)["gates"][0]["actual"] is None


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("crash", "eval.command exited 3"),
        ("notjson", "is not JSON"),
        ("string", "key 'verdict' is a string, not a number"),
        ("bool", "key 'score' is a boolean, not a number"),
        ("array", "is a JSON array, not an object"),
        ("nan", "key 'score' is nan, not a finite number"),
        ("silent", "exited 0 but wrote no metrics"),
    ],
)
def test_a_failing_command_is_one_line_exit_9_and_pushes_nothing(
    local_project: Project, mode: str, message: str
) -> None:
    ref = setup(local_project, mode=mode)
    out = local_project.trainops("eval", "run")
    assert out.code == 9, out.stderr
    assert message in out.last_error_line and "Traceback" not in out.stderr
    assert reports(local_project, ref) == []


def test_timeout_kills_the_process_group_and_pushes_nothing(local_project: Project) -> None:
    ref = setup(local_project, mode="hang", timeout="2s")
    started = time.monotonic()
    out = local_project.trainops("eval", "run")
    assert out.code == 9, out.stderr
    assert "timed out after 2s" in out.last_error_line
    assert time.monotonic() - started < 30
    child = int((local_project.root / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the eval command's child outlived the timeout"
    assert reports(local_project, ref) == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_eval_without_checkpoints_is_not_found(local_project: Project) -> None:
    setup(local_project)
    out = local_project.trainops("eval", "run", "step-9")
    assert out.code == 4
    assert out.last_error_line.startswith("Error: ") and "step-9" in out.last_error_line


def test_a_missing_command_is_an_input_error(local_project: Project) -> None:
    setup(local_project)
    doc = yaml.safe_load(local_project.manifest.read_text())
    doc["spec"]["eval"]["command"][0] = "/nonexistent/python-x"
    local_project.manifest.write_text(yaml.safe_dump(doc))
    out = local_project.trainops("eval", "run")
    assert out.code == 3
    assert "eval.command: '/nonexistent/python-x' not found" in out.last_error_line


def test_a_local_copy_is_used_when_its_digests_match(local_project: Project, caplog: pytest.LogCaptureFixture) -> None:
    setup(local_project)
    copy = local_project.root / "made" / "step-3"  # the directory the checkpoint was pushed from
    out = local_project.trainops("eval", "run", "--from", str(copy))
    assert out.code == 0, out.stderr
    assert json.loads((local_project.root / "seen.json").read_text())["checkpoint_dir"] == str(copy)
    (copy / "trainer_state.json").write_text('{"step": 4}')
    out = local_project.trainops("eval", "run", "--from", str(copy))
    assert out.code == 0, out.stderr
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("differs from" in w and "trainer_state.json" in w for w in warned), warned
    assert json.loads((local_project.root / "seen.json").read_text())["checkpoint_dir"] != str(copy)


@pytest.mark.parametrize("mode", ["crash", "string"])
def test_failures_push_nothing_on_every_backend(project: Project, mode: str) -> None:
    ref = setup(project, mode=mode)
    out = project.trainops("eval", "run")
    assert out.code == 9 and out.last_error_line.startswith("Error: eval.command")
    assert reports(project, ref) == []
    assert json.loads(project.trainops("eval", "ls", "-o", "json").stdout) == []


def test_best_and_latest_and_a_bare_tag_name_the_checkpoint(local_project: Project) -> None:
    setup(local_project, checkpoint="best")  # step 3, loss 2.0
    best = local_project.push_checkpoint(5, metrics={"loss": 0.5})
    latest = local_project.push_checkpoint(7, metrics={"loss": 1.0})
    assert local_project.trainops("eval", "run").code == 0
    assert json.loads((local_project.root / "seen.json").read_text())["ref"] == best
    assert local_project.trainops("eval", "run", "latest").code == 0
    assert json.loads((local_project.root / "seen.json").read_text())["ref"] == latest
    assert local_project.trainops("eval", "run", "step-3").code == 0
    assert ":step-3@sha256:" in json.loads((local_project.root / "seen.json").read_text())["ref"]
