"""An artifact's lineage: the one type, plain frozen dataclasses that validate by hand.

Lineage says what an artifact came from (code, image or interpreter, run, data, parent
artifacts, a forced gate). It is written to the `dev.trainops.lineage` annotation and the
config blob by `Lineage.as_json()`, and read back by `Lineage.read()`. No pydantic: listing
ten thousand checkpoints, walking a lineage and re-pushing unchanged content read and write
lineage, and loading pydantic (0.15–0.3 s here) would be most of their time.

- Construction checks what the config schema (registry/schema/config.v1.json) says of each
  value and raises an InputError naming the field.
- `as_json()` is the JSON object written (None fields left out, metrics as floats), byte for
  byte what trainops has always written, so digests do not change
  (tests/registry/test_lineage_data.py holds the bytes).
- `read()` accepts what earlier versions accepted: the canonical JSON, and the lax forms a
  hand-made annotation may hold (a number as a string, `5.0` for a step, a field by its
  Python name); whatever it refuses reads as the empty lineage.
- `JSON_SCHEMA_DEFS` is the schema of the lineage object, which the config blob's schema
  (trainops.registry.schema) embeds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from trainops.errors import InputError

Relation = Literal[
    "parent", "resumed-from", "derived-from", "dataset", "image", "evaluated", "released-from", "evaluated-by"
]
RELATIONS: tuple[str, ...] = get_args(Relation)

COMMIT_PATTERN = r"^[0-9a-f]{7,64}(-dirty)?$"
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
_COMMIT = re.compile(COMMIT_PATTERN)
_DIGEST = re.compile(DIGEST_PATTERN)
_JSON_NAMES = {"git_commit": "gitCommit", "git_repo": "gitRepo", "image_digest": "imageDigest", "run_id": "runId"}
_JSON_KEYS = frozenset(
    ("pipeline", "gitCommit", "gitRepo", "imageDigest", "environment", "runId", "step", "metrics", "parents", "forced")
)


class _Refused(InputError):
    """A value the reader does not accept: the annotation reads as the empty lineage."""

    def __init__(self) -> None:
        super().__init__("lineage is not a JSON object of the fields and values the config schema allows")


@dataclass(frozen=True)
class Parent:
    """An artifact this one came from: its digest, where it lives, and how it relates."""

    digest: str
    ref: str
    relation: Relation = "parent"

    def __post_init__(self) -> None:
        if not _DIGEST.fullmatch(self.digest):
            raise InputError(f"lineage parent digest {self.digest[:80]!r} is not sha256:<64 lowercase hex>")
        if self.relation not in RELATIONS:
            raise InputError(f"lineage parent relation {self.relation!r} is not one of {', '.join(RELATIONS)}")

    def as_json(self) -> dict[str, str]:
        return {"digest": self.digest, "ref": self.ref, "relation": self.relation}


@dataclass(frozen=True)
class Environment:
    """The interpreter a run ran in when no image was built (a local run): recorded instead
    of an image digest, never passed off as one."""

    python: str
    implementation: str
    platform: str
    packages: int  # how many distributions were installed
    digest: str  # sha256 of canonical JSON of the above and every installed name==version

    def __post_init__(self) -> None:
        if self.packages < 0 or not _DIGEST.fullmatch(self.digest):
            raise InputError("lineage environment needs python, implementation, platform, packages ≥ 0 and a digest")

    def as_json(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "implementation": self.implementation,
            "platform": self.platform,
            "packages": self.packages,
            "digest": self.digest,
        }


@dataclass(frozen=True)
class Forced:
    """A gate someone overrode: the reason they gave and who they are (git user.name
    <user.email>, else $USER)."""

    reason: str
    by: str

    def __post_init__(self) -> None:
        if not self.reason or not self.by:
            raise InputError("lineage forced needs a reason and who (by), both non-empty")

    def as_json(self) -> dict[str, str]:
        return {"reason": self.reason, "by": self.by}


@dataclass(frozen=True)
class Lineage:
    """What an artifact came from: code, image, run, data and parent artifacts."""

    pipeline: str | None = None
    git_commit: str | None = None
    git_repo: str | None = None
    image_digest: str | None = None
    environment: Environment | None = None  # where a run without an image ran
    run_id: str | None = None
    step: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    parents: Sequence[Parent] = ()  # kept as a tuple
    forced: Forced | None = None  # a release made without a passing eval: why, and by whom

    def __post_init__(self) -> None:
        """The constraints of the schema; InputError names the field."""
        if self.git_commit is not None and not _COMMIT.fullmatch(self.git_commit):
            raise InputError(f"lineage gitCommit {self.git_commit[:80]!r} is not a hex commit (with -dirty)")
        if self.image_digest is not None and not _DIGEST.fullmatch(self.image_digest):
            raise InputError(f"lineage imageDigest {self.image_digest[:80]!r} is not sha256:<64 lowercase hex>")
        if self.step is not None and self.step < 0:
            raise InputError(f"lineage step {self.step} is negative", hint="a training step counts from 0")
        metrics = self.metrics
        if type(metrics) is not dict or not all(type(value) is float for value in metrics.values()):
            object.__setattr__(self, "metrics", {key: _float(value) for key, value in metrics.items()})
        if type(self.parents) is not tuple:
            object.__setattr__(self, "parents", tuple(self.parents))

    def replace(self, **changes: Any) -> Lineage:
        """This lineage with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def as_json(self) -> dict[str, Any]:
        """The annotation's JSON object (before canonical encoding): None fields left out."""
        out: dict[str, Any] = {
            "pipeline": self.pipeline,
            "gitCommit": self.git_commit,
            "gitRepo": self.git_repo,
            "imageDigest": self.image_digest,
            "environment": self.environment.as_json() if self.environment is not None else None,
            "runId": self.run_id,
            "step": self.step,
            "metrics": dict(self.metrics),
            "parents": [p.as_json() for p in self.parents],
            "forced": self.forced.as_json() if self.forced is not None else None,
        }
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def read(cls, raw: str | None) -> Lineage:
        """The lineage an annotation holds: empty when it is absent or refused."""
        if not raw:
            return cls()
        try:
            return cls.from_json(json.loads(raw))
        except (ValueError, RecursionError, InputError):
            return cls()

    @classmethod
    def from_json(cls, body: Any) -> Lineage:
        """body (a parsed annotation) as Lineage; InputError when refused."""
        if type(body) is not dict:
            raise _Refused
        if not body.keys() <= _JSON_KEYS:
            body = _by_json_names(body)
        get = body.get
        step, env, forced = get("step"), get("environment"), get("forced")
        return cls(
            pipeline=_text_or_none(get("pipeline")),
            git_commit=_text_or_none(get("gitCommit")),
            git_repo=_text_or_none(get("gitRepo")),
            image_digest=_text_or_none(get("imageDigest")),
            environment=None if env is None else _environment(env),
            run_id=_text_or_none(get("runId")),
            step=step if step is None or type(step) is int else _integer(step),
            metrics=_metrics(body["metrics"]) if "metrics" in body else {},
            parents=_parents(body["parents"]) if "parents" in body else (),
            forced=None if forced is None else _forced(forced),
        )


# The readers below take the canonical JSON type first (`ckpt ls` runs them per row), then
# the lax forms earlier versions accepted.

_INT_TEXT = re.compile(r"[+-]?[0-9]+(_[0-9]+)*(\.0+)?", re.ASCII)
_FLOAT_TEXT = re.compile(
    r"[+-]?(([0-9]+(_[0-9]+)*)?\.?[0-9]+(_[0-9]+)*([eE][+-]?[0-9]+)?|[0-9]+\.|inf|infinity|nan)", re.ASCII | re.I
)


def _by_json_names(body: dict[str, Any]) -> dict[str, Any]:
    """body with fields given by their Python names (git_commit) under their JSON names;
    refused when a key is unknown or a field is given under both."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        name = _JSON_NAMES.get(key, key)
        if name not in _JSON_KEYS or name in out:
            raise _Refused
        out[name] = value
    return out


def _text_or_none(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _Refused


def _text(value: Any) -> str:
    if type(value) is not str:
        raise _Refused
    return value


def _integer(value: Any) -> int:
    kind = type(value)
    if kind is int:
        return int(value)
    if kind is bool:
        return int(value)
    if kind is float and math.isfinite(value) and value.is_integer() and -(2**63) <= value < 2**63:
        return int(value)
    if kind is str and _INT_TEXT.fullmatch(text := value.strip()):
        return int(text.partition(".")[0])
    raise _Refused


def _number(value: Any) -> float:
    kind = type(value)
    if kind is float:
        return float(value)
    if kind is int or kind is bool:
        return _float(value)
    if kind is str and _FLOAT_TEXT.fullmatch(text := value.strip()):
        return float(text)
    raise _Refused


def _float(value: float) -> float:
    """value as a float; an integer beyond a float's range is infinity, as JSON readers have it."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _fields(value: Any, required: tuple[str, ...]) -> dict[str, Any]:
    if type(value) is not dict or set(value) != set(required):
        raise _Refused
    return value


def _environment(value: Any) -> Environment:
    env = _fields(value, ("python", "implementation", "platform", "packages", "digest"))
    return Environment(
        python=_text(env["python"]),
        implementation=_text(env["implementation"]),
        platform=_text(env["platform"]),
        packages=_integer(env["packages"]),
        digest=_text(env["digest"]),
    )


def _forced(value: Any) -> Forced:
    forced = _fields(value, ("reason", "by"))
    return Forced(reason=_text(forced["reason"]), by=_text(forced["by"]))


def _metrics(value: Any) -> dict[str, float]:
    if type(value) is not dict:
        raise _Refused
    return {key: _number(number) for key, number in value.items()}


def _parents(value: Any) -> tuple[Parent, ...]:
    if type(value) is not list:
        raise _Refused
    out = []
    for item in value:
        if type(item) is not dict or not {"digest", "ref"} <= item.keys() <= {"digest", "ref", "relation"}:
            raise _Refused
        relation = _text(item.get("relation", "parent"))
        if relation not in RELATIONS:
            raise _Refused
        out.append(Parent(_text(item["digest"]), _text(item["ref"]), cast(Relation, relation)))
    return tuple(out)


def _nullable(schema: dict[str, Any], description: str | None = None, title: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"anyOf": [schema, {"type": "null"}], "default": None}
    if description:
        out["description"] = description
    if title:
        out["title"] = title
    return out


JSON_SCHEMA_DEFS: dict[str, Any] = {
    "Environment": {
        "additionalProperties": False,
        "description": (
            "The interpreter a run ran in when no image was built (a local run): recorded instead\n"
            "of an image digest, never passed off as one."
        ),
        "properties": {
            "digest": {
                "description": "sha256 of canonical JSON of the above and every installed name==version.",
                "pattern": DIGEST_PATTERN,
                "title": "Digest",
                "type": "string",
            },
            "implementation": {"description": "cpython, pypy, …", "title": "Implementation", "type": "string"},
            "packages": {
                "description": "How many distributions were installed.",
                "minimum": 0,
                "title": "Packages",
                "type": "integer",
            },
            "platform": {
                "description": "sys.platform and machine, such as linux-x86_64.",
                "title": "Platform",
                "type": "string",
            },
            "python": {"description": "Python version, such as 3.11.2.", "title": "Python", "type": "string"},
        },
        "required": ["python", "implementation", "platform", "packages", "digest"],
        "title": "Environment",
        "type": "object",
    },
    "Forced": {
        "additionalProperties": False,
        "description": "A gate someone overrode: the reason they gave and who they are.",
        "properties": {
            "by": {
                "description": "git user.name <user.email>, else $USER.",
                "minLength": 1,
                "title": "By",
                "type": "string",
            },
            "reason": {"minLength": 1, "title": "Reason", "type": "string"},
        },
        "required": ["reason", "by"],
        "title": "Forced",
        "type": "object",
    },
    "Lineage": {
        "additionalProperties": False,
        "description": "What an artifact came from: code, image, run, data and parent artifacts.",
        "properties": {
            "environment": _nullable({"$ref": "#/$defs/Environment"}, "Where a run without an image ran."),
            "forced": _nullable({"$ref": "#/$defs/Forced"}, "A release made without a passing eval: why, and by whom."),
            "gitCommit": _nullable({"pattern": COMMIT_PATTERN, "type": "string"}, title="Gitcommit"),
            "gitRepo": _nullable({"type": "string"}, title="Gitrepo"),
            "imageDigest": _nullable({"pattern": DIGEST_PATTERN, "type": "string"}, title="Imagedigest"),
            "metrics": {"additionalProperties": {"type": "number"}, "title": "Metrics", "type": "object"},
            "parents": {"items": {"$ref": "#/$defs/Parent"}, "title": "Parents", "type": "array"},
            "pipeline": _nullable({"type": "string"}, title="Pipeline"),
            "runId": _nullable({"type": "string"}, title="Runid"),
            "step": _nullable({"minimum": 0, "type": "integer"}, title="Step"),
        },
        "title": "Lineage",
        "type": "object",
    },
    "Parent": {
        "additionalProperties": False,
        "description": "An artifact this one came from.",
        "properties": {
            "digest": {"pattern": DIGEST_PATTERN, "title": "Digest", "type": "string"},
            "ref": {
                "description": "Where the parent lives (repository URL, with tag if it had one).",
                "title": "Ref",
                "type": "string",
            },
            "relation": {"default": "parent", "enum": list(RELATIONS), "title": "Relation", "type": "string"},
        },
        "required": ["digest", "ref"],
        "title": "Parent",
        "type": "object",
    },
}
"""The JSON Schema of the lineage object and its parts (`$defs` of the config blob's schema)."""
