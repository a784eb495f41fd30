"""`trainops hub export` up to the Hub's HTTP API.

No package on PyPI runs a Hub that accepts uploads (hf-local-hub ships no server binary in
its wheel; olah is a read-only mirror), so these tests cover everything before the upload
for real — the verified pull, the model card from a real lineage in a real registry, the
commit operations huggingface_hub is given — and the HTTP outcomes through huggingface_hub's
own error classifier and a real refused connection. Nothing here asserts on what a fake
server was told.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainops.hub.exporter import operations, prepare_export
from trainops.registry import store
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage, Parent
from trainops_testing.cli import run
from trainops_testing.services import free_port

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "hub" / "model-card.md"
UPDATE = os.environ.get("TRAINOPS_UPDATE_GOLDEN") == "1"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _push(registries: Registries, root: Path, name: str, files: dict[str, bytes], **kwargs: object) -> str:
    src = root / "src" / name
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    result = store.push(registries, source=src, ref=registries.ref(name), **kwargs)  # type: ignore[arg-type]
    return result.digest


def _eval_report(registries: Registries, checkpoint: str) -> str:
    """An eval report pushed the way `trainops eval run` pushes one (trainops.eval)."""
    from trainops.eval.report import EvalReport, ReportGate, push_report

    found = store.resolve(registries, ref=registries.ref(checkpoint))
    report = EvalReport(
        pipeline="tiny-llm",
        checkpoint=f"{checkpoint}@{found.manifest.digest}",  # short: the same digests in every tmp dir
        command=["python", "-m", "tiny_llm.eval"],
        metrics={"val_loss": 1.93, "accuracy": 0.71},
        gates=[
            ReportGate(metric="val_loss", op="<=", value=2.5, actual=1.93, passed=True),
            ReportGate(metric="accuracy", op=">=", value=0.5, actual=0.71, passed=True),
        ],
        passed=True,
        started="2026-01-01T00:00:00Z",
        ended="2026-01-01T00:00:05Z",
    )
    lineage = Lineage(
        metrics=report.metrics,
        parents=[Parent(digest=found.manifest.digest, ref=checkpoint, relation="evaluated")],
    )
    return str(push_report(registries, checkpoint=found, report=report, lineage=lineage).digest)


@pytest.fixture
def lineage_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Registries, str]:
    """dataset → checkpoint (step 300) → eval report → model: a release's whole lineage."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    url = f"file://{tmp_path}/reg"
    registries = Registries(default_registry=url)
    data = _push(registries, tmp_path, "data:v1", {"train.jsonl": b'{"text": "hello"}\n'}, kind="dataset")
    ckpt = _push(
        registries,
        tmp_path,
        "run/checkpoints:step-300",
        {"model.safetensors": b"weights-300", "config.json": b"{}"},
        kind="checkpoint",
        lineage=Lineage(
            git_commit=COMMIT,
            git_repo="https://git.example.com/team/tiny-llm.git",
            run_id="run-7",
            step=300,
            metrics={"loss": 1.5},
            parents=[Parent(digest=data, ref="data:v1", relation="dataset")],
        ),
    )
    report = _eval_report(registries, "run/checkpoints:step-300")
    _push(
        registries,
        tmp_path,
        "tiny-llm:1.0.0",
        {"model.safetensors": b"weights-300", "config.json": b"{}"},
        kind="model",
        lineage=Lineage(
            git_commit=COMMIT,
            parents=[
                Parent(digest=ckpt, ref="run/checkpoints:step-300", relation="derived-from"),
                Parent(digest=report, ref="run/checkpoints", relation="evaluated-by"),
            ],
        ),
    )
    return registries, url


def test_the_card_tells_the_lineage(lineage_registry: tuple[Registries, str], tmp_path: Path) -> None:
    registries, url = lineage_registry
    with prepare_export(registries, ref=registries.ref("tiny-llm:1.0.0"), repo_id="team/tiny-llm") as prepared:
        assert prepared.card_written
        assert prepared.files == ["README.md", "config.json", "model.safetensors"]
        assert (prepared.directory / "model.safetensors").read_bytes() == b"weights-300"
        card = (prepared.directory / "README.md").read_text().replace(url, "<registry>")
        ops = operations(prepared)
        assert [op.path_in_repo for op in ops] == prepared.files
        assert all(Path(op.path_or_fileobj).parent == prepared.directory for op in ops)
        kept = prepared.directory
    assert not kept.exists()  # the pulled files are removed after the upload step
    for needle in (
        COMMIT,
        "| checkpoint step | 300 |",
        "| run-7 |",
        "val_loss <= 2.5 | 1.93 | yes",
        "Verdict: **passed**",
    ):
        assert needle in card, needle
    assert "- `data:v1@sha256:" in card  # the dataset, pinned
    if UPDATE:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(card)
    assert card == GOLDEN.read_text(), "model card changed; regenerate with TRAINOPS_UPDATE_GOLDEN=1 and review"


def test_an_artifact_with_a_readme_keeps_its_own(hf_cache: object, tmp_path: Path) -> None:
    from trainops_testing.hf_cache import REPO_ID

    ref = f"file://{tmp_path}/reg/minilm:v1"
    assert run("hub", "import", REPO_ID, ref, "--from-dir", str(hf_cache.root)).code == 0  # type: ignore[attr-defined]
    registries = Registries()
    with prepare_export(registries, ref=registries.ref(ref), repo_id="me/minilm") as prepared:
        assert not prepared.card_written
        own = (hf_cache.snapshot / "README.md").read_bytes()  # type: ignore[attr-defined]
        assert (prepared.directory / "README.md").read_bytes() == own


def test_export_to_an_unreachable_hub_is_one_line_exit_6(
    lineage_registry: tuple[Registries, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainops_testing.planted import secret

    _, url = lineage_registry
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_TOKEN", secret("hf-token"))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    out = run("hub", "export", f"{url}/tiny-llm:1.0.0", "team/tiny-llm", "-o", "json")
    assert out.code == 6, out.stderr
    assert "could not be reached" in out.last_error_line and len(out.stderr.strip().splitlines()) == 1
    assert secret("hf-token") not in out.stderr
    assert out.stdout == ""


def test_export_refuses_offline_and_missing_artifacts(lineage_registry: tuple[Registries, str]) -> None:
    _, url = lineage_registry
    offline = run("hub", "export", f"{url}/tiny-llm:1.0.0", "team/tiny-llm")
    assert offline.code == 2 and "HF_HUB_OFFLINE" in offline.last_error_line
    missing = run("hub", "export", f"{url}/tiny-llm:9.9.9", "team/tiny-llm", env={"HF_HUB_OFFLINE": None})
    assert missing.code == 4, missing.stderr
    bad = run("hub", "export", f"{url}/tiny-llm:1.0.0", "team/x@dev", env={"HF_HUB_OFFLINE": None})
    assert bad.code == 2 and "--revision" in bad.stderr


def _hub_response(status: int, code: str | None = None) -> BaseException:
    """The exception huggingface_hub's own classifier raises for such a Hub answer."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    headers = {"X-Error-Code": code} if code else {}
    request = httpx2.Request("POST", "https://hub.test/api/models/team/tiny-llm/commit/main")
    response = httpx2.Response(status, headers=headers, request=request, json={"error": "refused"})
    try:
        hf_raise_for_status(response)
    except Exception as err:
        return err
    raise AssertionError("hf_raise_for_status accepted the response")


@pytest.mark.parametrize(
    ("status", "code", "exit_code", "words"),
    [
        (412, None, 5, "the branch moved on the Hub"),
        (403, "GatedRepo", 4, "is gated"),
        (404, "RepoNotFound", 4, "no such repository"),
        (404, "RevisionNotFound", 4, "no such revision"),
        (401, None, 4, "no such repository"),
        (500, None, 6, "HTTP 500"),
    ],
)
def test_hub_answers_map_to_one_line_errors(status: int, code: str | None, exit_code: int, words: str) -> None:
    from trainops.errors import TrainopsError
    from trainops.hub.hfapi import HubSettings, hub_errors

    raised = _hub_response(status, code)
    settings = HubSettings(endpoint="https://hub.test", token=None, offline=False, cache=None)
    with pytest.raises(TrainopsError) as caught, hub_errors("team/tiny-llm", settings=settings):
        raise raised
    assert caught.value.exit_code == exit_code, str(caught.value)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_json_keys_of_import_match_push(hf_cache: object, tmp_path: Path) -> None:
    """`hub import -o json` reports as `push` does (the same keys, plus the Hub's)."""
    from trainops_testing.hf_cache import REPO_ID

    src = hf_cache.snapshot  # type: ignore[attr-defined]
    pushed = json.loads(run("push", str(src), f"file://{tmp_path}/a/m:v1", "--kind", "model", "-o", "json").stdout)
    imported = json.loads(
        run("hub", "import", REPO_ID, f"file://{tmp_path}/b/m:v1", "--from-dir", str(src), "-o", "json").stdout
    )
    assert set(pushed) <= set(imported)
    assert imported["bytesTotal"] == pushed["bytesTotal"] and imported["files"] == pushed["files"]


def test_export_to_a_hub_that_refuses_uploads_is_one_line_exit_6(
    lineage_registry: tuple[Registries, str], hub_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """olah (read-only) answers the repository-creation call with an HTTP error: a real refusal."""
    _, url = lineage_registry
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", hub_server.endpoint)  # type: ignore[attr-defined]
    out = run("hub", "export", f"{url}/tiny-llm:1.0.0", "team/tiny-llm")
    assert out.code == 6, out.stderr
    assert "export to team/tiny-llm@main: the Hub answered HTTP" in out.last_error_line
    assert len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""
