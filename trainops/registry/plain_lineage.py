"""An artifact's lineage as plain data: read from and written to its annotation without pydantic.

trainops.registry.models.Lineage is the validating model that releases, evaluations and
pipelines build lineage with. Listing ten thousand checkpoints, walking a lineage and
re-pushing unchanged content need only the JSON, and loading pydantic and building the
models (0.15–0.3 s here) would be most of their time. PlainLineage

- reads the annotation as Lineage does: the same values for whatever Lineage accepts, the
  empty lineage for whatever it refuses (input the strict check here cannot vouch for,
  such as a string where a number belongs, goes through the model itself);
- writes the same JSON: `as_json()` equals `Lineage.model_dump(by_alias=True,
  exclude_none=True)`, so an artifact's digest does not depend on which of the two built
  it (tests/registry/test_plain_lineage.py holds the two to that).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from trainops.errors import InputError

Relation = Literal[
    "parent", "resumed-from", "derived-from", "dataset", "image", "evaluated", "released-from", "evaluated-by"
]
RELATIONS: tuple[str, ...] = get_args(Relation)

# The patterns lineage values follow, shared with the model (trainops.registry.models).
COMMIT_PATTERN = r"^[0-9a-f]{7,64}(-dirty)?$"
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
_COMMIT = re.compile(COMMIT_PATTERN)
_DIGEST = re.compile(DIGEST_PATTERN)
_STRINGS = ("pipeline", "gitCommit", "gitRepo", "imageDigest", "runId")
_KEYS = frozenset((*_STRINGS, "environment", "step", "metrics", "parents", "forced"))
_ENVIRONMENT = {"python": str, "implementation": str, "platform": str, "packages": int, "digest": str}
_FORCED = ("reason", "by")
_PARENT_KEYS = frozenset(("digest", "ref", "relation"))
_EXACT_FLOAT = 2**53  # a JSON integer metric up to this converts to a float exactly


class HasPlain(Protocol):
    """What has a plain form: models.Lineage (named by shape, so this module imports no model)."""

    def plain(self) -> PlainLineage: ...


@dataclass(frozen=True)
class PlainParent:
    """An artifact this one came from: its digest, where it lives, and how it relates."""

    digest: str
    ref: str
    relation: str = "parent"

    def __post_init__(self) -> None:
        if not _DIGEST.fullmatch(self.digest):
            raise InputError(f"lineage parent digest {self.digest[:80]!r} is not sha256:<64 lowercase hex>")
        if self.relation not in RELATIONS:
            raise InputError(f"lineage parent relation {self.relation!r} is not one of {', '.join(RELATIONS)}")

    def as_json(self) -> dict[str, str]:
        return {"digest": self.digest, "ref": self.ref, "relation": self.relation}


@dataclass(frozen=True)
class PlainLineage:
    """What an artifact came from (the fields of models.Lineage, under their Python names)."""

    pipeline: str | None = None
    git_commit: str | None = None
    git_repo: str | None = None
    image_digest: str | None = None
    environment: Mapping[str, Any] | None = None  # models.Environment's fields, as the JSON holds them
    run_id: str | None = None
    step: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    parents: tuple[PlainParent, ...] = ()
    forced: Mapping[str, str] | None = None  # models.Forced's reason and by

    def __post_init__(self) -> None:
        """The constraints models.Lineage puts on values; InputError names the field."""
        if self.git_commit is not None and not _COMMIT.fullmatch(self.git_commit):
            raise InputError(f"lineage gitCommit {self.git_commit[:80]!r} is not a hex commit (with -dirty)")
        if self.image_digest is not None and not _DIGEST.fullmatch(self.image_digest):
            raise InputError(f"lineage imageDigest {self.image_digest[:80]!r} is not sha256:<64 lowercase hex>")
        if self.step is not None and self.step < 0:
            raise InputError(f"lineage step {self.step} is negative", hint="a training step counts from 0")
        env = self.environment
        if env is not None and (
            set(env) != set(_ENVIRONMENT)
            or not all(type(env[k]) is kind for k, kind in _ENVIRONMENT.items())
            or env["packages"] < 0
            or not _DIGEST.fullmatch(env["digest"])
        ):
            raise InputError("lineage environment needs python, implementation, platform, packages ≥ 0 and a digest")
        if self.forced is not None and (
            set(self.forced) != set(_FORCED) or not all(isinstance(v, str) and v for v in self.forced.values())
        ):
            raise InputError("lineage forced needs a reason and who (by), both non-empty")

    def as_json(self) -> dict[str, Any]:
        """The annotation's JSON object (before canonical encoding): None fields left out."""
        out: dict[str, Any] = {
            "pipeline": self.pipeline,
            "gitCommit": self.git_commit,
            "gitRepo": self.git_repo,
            "imageDigest": self.image_digest,
            "environment": dict(self.environment) if self.environment is not None else None,
            "runId": self.run_id,
            "step": self.step,
            "metrics": {k: float(v) for k, v in self.metrics.items()},
            "parents": [p.as_json() for p in self.parents],
            "forced": dict(self.forced) if self.forced is not None else None,
        }
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def of(cls, lineage: HasPlain | PlainLineage) -> PlainLineage:
        """The plain form of a model (or lineage itself, when it is plain already)."""
        return lineage if isinstance(lineage, PlainLineage) else lineage.plain()

    @classmethod
    def read(cls, raw: str | None) -> PlainLineage | None:
        """The lineage an annotation holds (empty when absent), or None when it is not in the
        plain, canonical form: then only the model can say what it holds (the caller,
        trainops.registry.artifact.read_plain_lineage, asks it)."""
        if not raw:
            return cls()
        try:
            return _plain(json.loads(raw))
        except (ValueError, RecursionError):
            return None


def _plain(body: Any) -> PlainLineage | None:
    """body as a PlainLineage when every field has its canonical JSON type and a valid value
    (then models.Lineage reads the same), else None. Plain loops: `ckpt ls` runs this per row."""
    if type(body) is not dict or not body.keys() <= _KEYS:
        return None
    for key in _STRINGS:
        value = body.get(key)
        if value is not None and type(value) is not str:
            return None
    step, env, forced = body.get("step"), body.get("environment"), body.get("forced")
    if (step is not None and type(step) is not int) or not _dict_or_none(env) or not _dict_or_none(forced):
        return None
    metrics = _metrics(body.get("metrics", {}))
    parents = _parents(body.get("parents", []))
    if metrics is None or parents is None:
        return None
    try:
        return PlainLineage(
            pipeline=body.get("pipeline"),
            git_commit=body.get("gitCommit"),
            git_repo=body.get("gitRepo"),
            image_digest=body.get("imageDigest"),
            environment=env,
            run_id=body.get("runId"),
            step=step,
            metrics=metrics,
            parents=parents,
            forced=forced,
        )
    except InputError:
        return None


def _dict_or_none(value: Any) -> bool:
    return value is None or type(value) is dict


def _metrics(value: Any) -> dict[str, float] | None:
    """Numbers that are floats already, or integers a float holds exactly; else None."""
    if type(value) is not dict:
        return None
    out: dict[str, float] = {}
    for key, number in value.items():
        kind = type(number)
        if (kind is int and abs(number) <= _EXACT_FLOAT) or (kind is float and math.isfinite(number)):
            out[key] = float(number)
        else:
            return None
    return out


def _parents(value: Any) -> tuple[PlainParent, ...] | None:
    if type(value) is not list:
        return None
    out = []
    for item in value:
        if type(item) is not dict or not item.keys() <= _PARENT_KEYS:
            return None
        digest, ref, relation = item.get("digest"), item.get("ref"), item.get("relation", "parent")
        if type(digest) is not str or type(ref) is not str or type(relation) is not str:
            return None
        try:
            out.append(PlainParent(digest, ref, relation))
        except InputError:
            return None
    return tuple(out)
