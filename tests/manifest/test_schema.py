"""`trainops schema`: a valid JSON Schema that accepts what trainops accepts."""

from __future__ import annotations

import json
import sys
from inspect import signature
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]

from trainops.cli.main import main
from trainops.manifest import check_manifest
from trainops.manifest.schema import SCHEMA_ID

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(REPO.glob("examples/*/trainops.yaml"))


def _run(args: list[str]) -> tuple[int, str]:
    kwargs: dict[str, Any] = {}
    if "mix_stderr" in signature(CliRunner).parameters:
        kwargs["mix_stderr"] = False
    with CliRunner(**kwargs).isolation() as streams:
        code = main(args)
        sys.stdout.flush()
    return code, streams[0].getvalue().decode()


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    code, out = _run(["schema"])
    assert code == 0
    loaded = json.loads(out)
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema)


def _errors(validator: Draft202012Validator, document: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]


def test_schema_is_a_valid_draft_2020_12_schema(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_ID
    assert schema["type"] == "object"
    assert set(schema["required"]) >= {"apiVersion", "kind", "metadata", "spec"}
    assert schema["additionalProperties"] is False


def test_schema_properties_are_the_camel_case_yaml_keys(schema: dict[str, Any]) -> None:
    train = schema["$defs"]["TrainSpec"]["properties"]
    assert "gpusPerNode" in train
    assert "gpus_per_node" not in train


def test_there_are_examples() -> None:
    assert EXAMPLES, "no examples/*/trainops.yaml found"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_every_example_validates_against_the_schema(validator: Draft202012Validator, path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert _errors(validator, document) == []
    assert check_manifest(path).ok


@pytest.fixture(scope="module")
def initialised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("init") / "my-model"
    code, _ = _run(["init", str(directory)])
    assert code == 0
    return directory / "trainops.yaml"


def test_init_output_validates_against_the_schema(validator: Draft202012Validator, initialised: Path) -> None:
    document = yaml.safe_load(initialised.read_text(encoding="utf-8"))
    assert _errors(validator, document) == []


@pytest.mark.parametrize(
    ("where", "key"),
    [
        (("spec", "train"), "schedular"),
        (("spec",), "regsitry"),
        ((), "specs"),
        (("metadata",), "labls"),
        (("environments", "prod"), "trian"),
    ],
)
def test_unknown_key_fails_schema_validation_too(
    validator: Draft202012Validator, initialised: Path, where: tuple[str, ...], key: str
) -> None:
    document = yaml.safe_load(initialised.read_text(encoding="utf-8"))
    node = document
    for part in where:
        node = node[part]
    node[key] = "volcano"
    errors = list(validator.iter_errors(document))
    assert errors, f"the schema accepted an unknown key {'.'.join((*where, key))}"
    # Reported at the mapping that holds the key (or naming the key).
    assert any(tuple(e.absolute_path) == where or key in e.message for e in errors), errors


def test_schema_and_trainops_agree_on_a_wrong_value(validator: Draft202012Validator, initialised: Path) -> None:
    document = yaml.safe_load(initialised.read_text(encoding="utf-8"))
    document["spec"]["train"]["scheduler"] = "k8s"
    assert _errors(validator, document)


def test_docs_manifest_reference_is_current() -> None:
    from trainops.manifest.schema import manifest_reference_markdown

    committed = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "manifest.md").read_text()
    assert committed == manifest_reference_markdown(), "regenerate: python scripts/gen_docs.py"
