"""PlainLineage (no pydantic) and models.Lineage read and write the same lineage, byte for byte.

The CLI's push, `ckpt ls`, `ckpt latest` and the lineage walk use the plain form to stay
off pydantic; releases, evaluations and pipelines build the model. An artifact's digest
must not depend on which of the two built it, and a listing must show what the model reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import run
from tests.registry.conftest import make_tree
from trainops.errors import InputError
from trainops.registry import media, store
from trainops.registry.artifact import build_manifest, canonical_json, config_blob, parse_manifest
from trainops.registry.backends.base import Descriptor, ManifestData
from trainops.registry.context import Registries
from trainops.registry.models import ArtifactConfig, Environment, Forced, Lineage, Parent
from trainops.registry.parents import resolve_parents
from trainops.registry.plain_lineage import PlainLineage, PlainParent

D1 = "sha256:" + "a" * 64
D2 = "sha256:" + "b" * 64

MODELS = [
    Lineage(),
    Lineage(runId="r1", step=0),
    Lineage(
        pipeline="tiny-llm",
        gitCommit="0123abc" + "d" * 33 + "-dirty",
        gitRepo="https://example.com/x.git",
        imageDigest=D1,
        runId="run-7",
        step=1200,
        metrics={"loss": 1, "val_loss": 0.123456789012345, "big": 1e300, "neg": -0.0},
        parents=[Parent(digest=D1, ref="oci://r/x:step-1100", relation="resumed-from"), Parent(digest=D2, ref="")],
    ),
    Lineage(
        environment=Environment(
            python="3.11.7", implementation="cpython", platform="linux-x86_64", packages=42, digest=D2
        ),
        forced=Forced(reason="eval flaked", by="A <a@example.com>"),
        metrics={"ünïcode": 2.5},
    ),
]


@pytest.mark.parametrize("model", MODELS)
def test_the_plain_form_writes_the_models_json(model: Lineage) -> None:
    plain = PlainLineage.of(model)
    assert plain.as_json() == model.model_dump(by_alias=True, exclude_none=True)
    rebuilt = PlainLineage(**{f: getattr(plain, f) for f in plain.__dataclass_fields__})
    assert canonical_json(rebuilt.as_json()) == canonical_json(model.model_dump(by_alias=True, exclude_none=True))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("kind", ["checkpoint", "dataset", "eval", "other", "model"])
def test_manifest_and_config_digests_do_not_depend_on_the_form(model: Lineage, kind: str) -> None:
    layers = [Descriptor(media.WEIGHT_RAW, D2, 10, {media.A_FILEPATH: "w.safetensors"})]
    created = "2026-12-03T00:00:00Z"
    blobs = [config_blob(kind, created, form, layers) for form in (model, PlainLineage.of(model))]
    assert blobs[0] == blobs[1]
    if kind != "model":
        expected = ArtifactConfig(kind=kind, created=created, lineage=model)  # type: ignore[arg-type]
        assert blobs[0][0] == canonical_json(expected.model_dump(by_alias=True, exclude_none=True))
    config = Descriptor(blobs[0][1], D1, 3)
    digests = {
        build_manifest(kind=kind, config=config, layers=layers, created=created, lineage=form, annotations={}).digest
        for form in (model, PlainLineage.of(model))
    }
    assert len(digests) == 1


RAW = [
    "",
    "{}",
    '{"runId": "r", "step": 5, "metrics": {"loss": 1, "acc": 0.5}}',
    json.dumps(MODELS[2].model_dump(by_alias=True, exclude_none=True)),
    json.dumps(MODELS[3].model_dump(by_alias=True, exclude_none=True)),
    # lax input the model coerces: the plain reader must agree
    '{"step": "5"}',
    '{"step": 5.0, "metrics": {"a": true}}',
    '{"metrics": {"a": "1.5"}}',
    '{"git_commit": "abcdef1"}',  # a field by its Python name
    '{"metrics": {"a": NaN}}',
    '{"metrics": {"a": 123456789012345678901234567890}}',
    # refused by the model: the empty lineage
    '{"step": -1}',
    '{"gitCommit": "abcdef1\\n"}',
    '{"gitCommit": "ABCDEF1"}',
    '{"imageDigest": "sha256:abc"}',
    '{"surprise": 1}',
    '{"parents": [{"digest": "' + D1 + '"}]}',
    '{"parents": [{"digest": "' + D1 + '", "ref": "x", "relation": "sibling"}]}',
    '{"parents": [{"digest": "' + D1 + '", "ref": "x", "extra": "y"}]}',
    '{"environment": {"python": "3", "implementation": "c", "platform": "p", "packages": 1}}',
    '{"environment": {"python": "3", "implementation": "c", "platform": "p", "packages": -1, "digest": "' + D1 + '"}}',
    '{"forced": {"reason": "", "by": "me"}}',
    '{"metrics": null}',
    "[1, 2]",
    "not json",
    '{"step": ' + "[" * 5000 + "]" * 5000 + "}",
]


@pytest.mark.parametrize("raw", RAW)
def test_the_plain_reader_reads_what_the_model_reads(raw: str) -> None:
    annotations = {media.A_LINEAGE: raw} if raw else {}
    body = {"schemaVersion": 2, "config": {"mediaType": media.CONFIG, "digest": D1, "size": 1}, "layers": []}
    data = canonical_json({**body, "annotations": annotations})
    parsed = parse_manifest(ManifestData(data, media.OCI_MANIFEST, D2))
    plain, model = parsed.plain_lineage(), PlainLineage.of(parsed.lineage())
    assert canonical_json(plain.as_json()) == canonical_json(model.as_json())  # NaN != NaN, "NaN" == "NaN"


def test_the_plain_form_refuses_what_the_model_refuses() -> None:
    for bad in (
        {"step": -1},
        {"git_commit": "xyz"},
        {"image_digest": "sha256:1"},
        {"forced": {"reason": "r"}},
        {"environment": {"python": "3"}},
    ):
        with pytest.raises(InputError, match="lineage"):
            PlainLineage(**bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="relation"):
        PlainParent(D1, "x", "sibling")
    with pytest.raises(InputError, match="kind"):
        config_blob("weights", "2026-12-03T00:00:00Z", PlainLineage(), [])


def test_cli_push_and_a_model_lineage_push_give_one_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds plain lineage; a library caller with the model gets the same artifact."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    url = f"file://{tmp_path / 'registry'}"
    src = make_tree(tmp_path / "ckpt", {"model.safetensors": b"w" * 64, "config.json": b"{}"})
    parent = run("push", str(src), f"{url}/m/c:1", "--kind", "checkpoint", "-o", "json")
    assert parent.code == 0, parent.stderr
    args = ["--kind", "checkpoint", "--step", "7", "--metric", "loss=2", "--run-id", "r9", "--parent", f"{url}/m/c:1"]
    by_cli = run("push", str(src), f"{url}/m/c:2", *args, "-o", "json")
    assert by_cli.code == 0, by_cli.stderr
    with Registries(default_registry=url) as reg:
        lineage = Lineage(
            runId="r9", step=7, metrics={"loss": 2.0}, parents=resolve_parents(reg, [("m/c:1", "parent")])
        )
        by_model = store.push(reg, source=src, ref=reg.ref("m/c:3"), kind="checkpoint", lineage=lineage)
    assert json.loads(by_cli.stdout)["digest"] == by_model.digest
    assert by_model.digest != json.loads(parent.stdout)["digest"]


def test_cli_push_refuses_a_negative_step(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "c", {"w": b"1"})
    result = run("push", str(src), f"file://{tmp_path / 'registry'}/m/c:1", "--step", "-1")
    assert result.code == 2
    assert "--step" in result.stderr
    assert not (tmp_path / "registry").exists()
