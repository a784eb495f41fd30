"""Lineage (registry/lineage_data.py) writes the bytes trainops has always written, and reads
what it has always read.

An artifact's digest covers its lineage annotation and config blob, so the JSON is pinned
here byte for byte (the goldens are what the earlier pydantic model wrote); the reader
accepts the lax forms a hand-made annotation may hold and reads what it refuses as the
empty lineage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.registry.conftest import make_tree
from trainops.errors import InputError
from trainops.registry import media, store
from trainops.registry.artifact import ArtifactConfig, build_manifest, canonical_json, config_blob, parse_manifest
from trainops.registry.backends.base import Descriptor, ManifestData
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Environment, Forced, Lineage, Parent
from trainops.registry.parents import pin_parents
from trainops_testing.cli import run

D1 = "sha256:" + "a" * 64
D2 = "sha256:" + "b" * 64
CREATED = "2026-12-03T00:00:00Z"
A64, B64 = "a" * 64, "b" * 64

# (lineage, its annotation's canonical JSON, the digests of a checkpoint's and a model's manifest)
GOLDEN = [
    (
        Lineage(),
        '{"metrics":{},"parents":[]}',
        "sha256:2fd86e3fd818a3360e94d05f1aad84667f098fb79c22f9ef510828b2ac76e67e",
        "sha256:5600dece751a2fa4093ff4771ec96755232a810b7b20df280016cd77f46c2f52",
    ),
    (
        Lineage(run_id="r1", step=0),
        '{"metrics":{},"parents":[],"runId":"r1","step":0}',
        "sha256:132c14a975b97fa120757a3410e734d39e356295479a031f6e75fc14b47f210e",
        "sha256:5faf7d2ed80f509c5f4982c63da17c9d93f231c5068ec4d68762105605e16ea1",
    ),
    (
        Lineage(
            pipeline="tiny-llm",
            git_commit="0123abc" + "d" * 33 + "-dirty",
            git_repo="https://example.com/x.git",
            image_digest=D1,
            run_id="run-7",
            step=1200,
            metrics={"loss": 1, "val_loss": 0.123456789012345, "big": 1e300, "neg": -0.0},
            parents=[Parent(digest=D1, ref="oci://r/x:step-1100", relation="resumed-from"), Parent(digest=D2, ref="")],
        ),
        '{"gitCommit":"0123abcddddddddddddddddddddddddddddddddd-dirty","gitRepo":"https://example.com/x.git",'
        f'"imageDigest":"sha256:{A64}",'
        '"metrics":{"big":1e+300,"loss":1.0,"neg":-0.0,"val_loss":0.123456789012345},'
        f'"parents":[{{"digest":"sha256:{A64}","ref":"oci://r/x:step-1100","relation":"resumed-from"}},'
        f'{{"digest":"sha256:{B64}","ref":"","relation":"parent"}}],'
        '"pipeline":"tiny-llm","runId":"run-7","step":1200}',
        "sha256:cbe0d28116aa8dd7bda67ba8de297523fe5225c44bb4f8209f4671658579cf62",
        "sha256:45697e563b6ab33798410f1b96b5981afd12f2e08d560addcdd52f9538df342b",
    ),
    (
        Lineage(
            environment=Environment(
                python="3.11.7", implementation="cpython", platform="linux-x86_64", packages=42, digest=D2
            ),
            forced=Forced(reason="eval flaked", by="A <a@example.com>"),
            metrics={"ünïcode": 2.5},
        ),
        f'{{"environment":{{"digest":"sha256:{B64}","implementation":"cpython","packages":42,'
        '"platform":"linux-x86_64","python":"3.11.7"},"forced":{"by":"A <a@example.com>","reason":"eval flaked"},'
        '"metrics":{"ünïcode":2.5},"parents":[]}',
        "sha256:d3c71ceea78c9980ad220e6eea4a2292241b0ec6943f47748d32e230579a6571",
        "sha256:dba1a4ee5896612d762cf98163525b7ecccfd9c22139ecc028bae608cb741487",
    ),
]


@pytest.mark.parametrize(("lineage", "annotation", "checkpoint", "model"), GOLDEN)
def test_the_json_and_the_digests_are_what_they_have_always_been(
    lineage: Lineage, annotation: str, checkpoint: str, model: str
) -> None:
    assert canonical_json(lineage.as_json()).decode() == annotation
    layers = [Descriptor(media.WEIGHT_RAW, D2, 10, {media.A_FILEPATH: "w.safetensors"})]
    data, _ = config_blob("checkpoint", CREATED, lineage, layers)
    assert data.decode() == f'{{"created":"{CREATED}","kind":"checkpoint","lineage":{annotation},"schemaVersion":1}}'
    via_model = ArtifactConfig(kind="checkpoint", created=CREATED, lineage=lineage)
    assert canonical_json(via_model.model_dump(by_alias=True, exclude_none=True)) == data
    assert ArtifactConfig.model_validate_json(data).lineage == lineage
    digests = []
    for kind in ("checkpoint", "model"):
        _, blob_type = config_blob(kind, CREATED, lineage, layers)
        config = Descriptor(blob_type, D1, 3)
        built = build_manifest(
            kind=kind, config=config, layers=layers, created=CREATED, lineage=lineage, annotations={}
        )
        digests.append(built.digest)
    assert digests == [checkpoint, model]
    assert Lineage.read(annotation) == lineage


RAW = [
    ("", "{}"),
    ("{}", "{}"),
    (
        '{"runId": "r", "step": 5, "metrics": {"loss": 1, "acc": 0.5}}',
        '{"metrics":{"acc":0.5,"loss":1.0},"runId":"r","step":5}',
    ),
    # lax input earlier versions coerced, read the same
    ('{"step": "5"}', '{"step":5}'),
    ('{"step": 5.0, "metrics": {"a": true}}', '{"metrics":{"a":1.0},"step":5}'),
    ('{"metrics": {"a": "1.5"}}', '{"metrics":{"a":1.5}}'),
    ('{"git_commit": "abcdef1"}', '{"gitCommit":"abcdef1"}'),  # a field by its Python name
    ('{"metrics": {"a": NaN}}', '{"metrics":{"a":NaN}}'),
    ('{"metrics": {"a": 123456789012345678901234567890}}', '{"metrics":{"a":1.2345678901234568e+29}}'),
    ('{"step": " 7 ", "metrics": {"a": " 1e3 ", "b": "inf"}}', '{"metrics":{"a":1000.0,"b":Infinity},"step":7}'),
    (
        '{"environment": {"python": "3", "implementation": "c", "platform": "p", "packages": "4", "digest": "'
        + D1
        + '"}}',
        f'{{"environment":{{"digest":"{D1}","implementation":"c","packages":4,"platform":"p","python":"3"}}}}',
    ),
]
REFUSED = [
    '{"step": -1}',
    '{"step": 5.5}',
    '{"step": "0x10"}',
    '{"runId": 5}',
    '{"gitCommit": "abcdef1", "git_commit": "abcdef1"}',
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
    '{"metrics": {"a": ""}}',
    "[1, 2]",
    "not json",
    '{"step": ' + "[" * 5000 + "]" * 5000 + "}",
]


def _parsed(raw: str) -> Lineage:
    annotations = {media.A_LINEAGE: raw} if raw else {}
    body = {"schemaVersion": 2, "config": {"mediaType": media.CONFIG, "digest": D1, "size": 1}, "layers": []}
    data = canonical_json({**body, "annotations": annotations})
    return parse_manifest(ManifestData(data, media.OCI_MANIFEST, D2)).lineage()


@pytest.mark.parametrize(("raw", "read"), RAW)
def test_the_reader_reads_what_it_always_read(raw: str, read: str) -> None:
    expected = {"metrics": {}, "parents": [], **json.loads(read)}
    assert canonical_json(_parsed(raw).as_json()) == canonical_json(expected)  # NaN != NaN, "NaN" == "NaN"


@pytest.mark.parametrize("raw", REFUSED)
def test_what_the_reader_refuses_is_the_empty_lineage(raw: str) -> None:
    assert _parsed(raw) == Lineage()
    if raw.startswith("{") and "[" * 10 not in raw:
        with pytest.raises(InputError, match="lineage"):
            Lineage.from_json(json.loads(raw))


def test_construction_refuses_what_the_schema_refuses() -> None:
    for bad in (
        {"step": -1},
        {"git_commit": "xyz"},
        {"image_digest": "sha256:1"},
    ):
        with pytest.raises(InputError, match="lineage"):
            Lineage(**bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="forced"):
        Forced(reason="r", by="")
    with pytest.raises(InputError, match="environment"):
        Environment(python="3", implementation="c", platform="p", packages=-1, digest=D1)
    with pytest.raises(InputError, match="relation"):
        Parent(D1, "x", "sibling")
    with pytest.raises(InputError, match="kind"):
        config_blob("weights", CREATED, Lineage(), [])


def test_replace_changes_fields_and_checks_them_again() -> None:
    base = Lineage(pipeline="p", metrics={"a": 1})
    changed = base.replace(step=3, parents=[Parent(D1, "x")])
    assert changed == Lineage(pipeline="p", metrics={"a": 1.0}, step=3, parents=(Parent(D1, "x"),))
    assert base.step is None
    with pytest.raises(InputError, match="step"):
        base.replace(step=-1)


def test_cli_push_and_a_library_push_give_one_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI and a library caller building Lineage themselves make the same artifact."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    url = f"file://{tmp_path / 'registry'}"
    src = make_tree(tmp_path / "ckpt", {"model.safetensors": b"w" * 64, "config.json": b"{}"})
    parent = run("push", str(src), f"{url}/m/c:1", "--kind", "checkpoint", "-o", "json")
    assert parent.code == 0, parent.stderr
    args = ["--kind", "checkpoint", "--step", "7", "--metric", "loss=2", "--run-id", "r9", "--parent", f"{url}/m/c:1"]
    by_cli = run("push", str(src), f"{url}/m/c:2", *args, "-o", "json")
    assert by_cli.code == 0, by_cli.stderr
    with Registries(default_registry=url) as reg:
        lineage = Lineage(run_id="r9", step=7, metrics={"loss": 2}, parents=pin_parents(reg, [("m/c:1", "parent")]))
        by_library = store.push(reg, source=src, ref=reg.ref("m/c:3"), kind="checkpoint", lineage=lineage)
    assert json.loads(by_cli.stdout)["digest"] == by_library.digest
    assert by_library.digest != json.loads(parent.stdout)["digest"]


def test_cli_push_refuses_a_negative_step(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "c", {"w": b"1"})
    result = run("push", str(src), f"file://{tmp_path / 'registry'}/m/c:1", "--step", "-1")
    assert result.code == 2
    assert "--step" in result.stderr
    assert not (tmp_path / "registry").exists()
