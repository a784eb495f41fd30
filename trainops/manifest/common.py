"""Building blocks shared by the manifest models: the strict base model and common value types."""

from __future__ import annotations

import operator
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from trainops.errors import UsageError


class StrictModel(BaseModel):
    """Every manifest model: unknown keys are errors, YAML keys are camelCase, and values
    have the type the field says (strict: `gpusPerNode: "8"` is a string, not a number)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        frozen=True,
    )


DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DURATION = r"^([0-9]+(ms|s|m|h))+$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E)?$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
SLO_WINDOW = r"^[0-9]+(m|h|d|w)$"

# What a pattern means, for error messages ("should be a duration such as 5m").
PATTERN_NAMES = {
    DNS_LABEL: "a DNS-1123 label (lowercase letters, digits and '-')",
    DURATION: "a duration such as 30s, 5m or 1h30m",
    QUANTITY: "a quantity such as 8, 500m or 64Gi",
    ENV_NAME: "an environment variable name (letters, digits, '_')",
    SLO_WINDOW: "an SLO window such as 30d, 7d, 12h or 4w",
}

Name = Annotated[
    str,
    StringConstraints(pattern=DNS_LABEL, max_length=63),
    Field(description="A DNS-1123 label: lowercase letters, digits and '-', at most 63 characters."),
]
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME)]
Duration = Annotated[
    str,
    StringConstraints(pattern=DURATION),
    Field(description="A duration such as 30s, 5m, 1h30m."),
]
Quantity = Annotated[
    str,
    StringConstraints(pattern=QUANTITY),
    Field(description="A Kubernetes resource quantity such as 8, 500m, 64Gi."),
]
Percent = Annotated[int, Field(ge=0, le=100)]
CompareOp = Literal["<", "<=", ">", ">=", "==", "!="]
_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def compare(actual: float, op: CompareOp, value: float) -> bool:
    """`actual op value` for the comparison operators of eval gates and analysis thresholds."""
    return bool(_COMPARE[op](actual, value))


Command = Annotated[list[Annotated[str, StringConstraints(min_length=1)]], Field(min_length=1)]

_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(value: str) -> float:
    """Seconds in a Duration string (already validated by its pattern)."""
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(value))


_SECONDS = re.compile(r"^[0-9]+(\.[0-9]+)?$")


def parse_seconds(text: str, *, what: str) -> float:
    """Seconds from a command-line value: a number (0.5) or a duration (10s, 500ms, 1m30s)."""

    if _SECONDS.match(text):
        return float(text)
    if re.match(DURATION, text):
        return duration_seconds(text)
    raise UsageError(f"{what} {text!r} is not a duration", hint="write seconds (0.5) or a duration such as 10s, 500ms")


REGISTRY_SCHEMES = ("file", "oci", "s3")


def _registry_url(value: str) -> str:
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in REGISTRY_SCHEMES or not rest:
        raise ValueError(
            f"{value!r} is not a registry URL; use file://PATH, oci://HOST/NAMESPACE or s3://BUCKET/PREFIX"
        )
    if scheme == "s3" and len(rest.split("/", 1)[0]) < 3:
        raise ValueError(f"{value!r}: an S3 bucket name has at least 3 characters")
    return value


RegistryURL = Annotated[
    str,
    AfterValidator(_registry_url),
    Field(description="Where artifacts live: file://PATH, oci://HOST[:PORT]/NAMESPACE or s3://BUCKET/PREFIX."),
]

_GIT_URL = re.compile(r"^(file|https?|ssh|git)://.+|^[\w.-]+@[\w.-]+:.+")


def _git_url(value: str) -> str:
    if not _GIT_URL.match(value):
        raise ValueError(
            f"{value!r} is not a git URL; use file://PATH, https://HOST/REPO.git, ssh://… or user@host:repo"
        )
    return value


GitURL = Annotated[str, AfterValidator(_git_url)]


def _relative_path(value: str) -> str:
    parts = value.replace("\\", "/").split("/")
    if value.startswith("/") or ".." in parts:
        raise ValueError(f"{value!r} must be a relative path inside the repository, without '..'")
    return value


RelativePath = Annotated[str, StringConstraints(min_length=1), AfterValidator(_relative_path)]


def _absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{value!r} must be an absolute path in the container, such as /ckpt")
    return value


AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]

_IMAGE_REF = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)


def _image_ref(value: str) -> str:
    if value.startswith(("oci://", "file://", "s3://")):
        return value  # a trainops registry reference; parsed where it is used
    if not _IMAGE_REF.match(value):
        raise ValueError(f"{value!r} is not an image reference such as registry.example.com/team/base:1.0")
    return value


ImageRef = Annotated[str, AfterValidator(_image_ref)]
