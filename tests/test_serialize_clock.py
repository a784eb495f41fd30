"""The one serialization home and the one clock: what `to_data` makes of each kind of result,
and the time formats (ISO 8601 UTC with Z in JSON, seconds for reproducible stamps, one
display format for tables; both precisions read back)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import ClassVar

import pytest

from trainops import clock
from trainops.errors import NotFoundError
from trainops.registry.reference import parse_reference
from trainops.serialize import HIDDEN, camel, dumps, to_data


class Color(enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    bytes_sent: int
    when: datetime


@dataclass
class Outer:
    repo_id: str
    inner: Inner
    metrics: dict[str, float]
    where: Path
    color: Color
    tags: frozenset[str]
    handle: object = field(default=None, metadata=HIDDEN)
    error: NotFoundError | None = None
    data_properties: ClassVar[tuple[str, ...]] = ("exit_code",)

    @property
    def exit_code(self) -> int:
        return self.error.exit_code if self.error else 0


def test_results_become_camel_case_json_by_construction() -> None:
    moment = datetime(2026, 12, 4, 13, 18, 12, 345000, tzinfo=timezone.utc)
    value = Outer(
        repo_id="team/m",
        inner=Inner(bytes_sent=3, when=moment),
        metrics={"val_loss": 1.5},  # a mapping's keys are data: kept as written
        where=Path("/x/y"),
        color=Color.RED,
        tags=frozenset({"b", "a"}),
        handle=object(),  # hidden: never serialized (it could not be)
        error=NotFoundError("no such tag", hint="list the tags"),
    )
    assert to_data(value) == {
        "repoId": "team/m",
        "inner": {"bytesSent": 3, "when": "2026-12-04T13:18:12.345Z"},
        "metrics": {"val_loss": 1.5},
        "where": "/x/y",
        "color": "red",
        "tags": ["a", "b"],
        "error": "no such tag; list the tags",
        "exitCode": 4,
    }
    assert dumps([value], indent=None).startswith('[{"repoId": "team/m"')


def test_a_reference_is_its_text() -> None:
    ref = parse_reference("oci://h:5000/team/m:v1@sha256:" + "a" * 64)
    assert to_data({"ref": ref}) == {"ref": str(ref)}


def test_pydantic_models_by_alias_and_unknown_objects_refused() -> None:
    from trainops.registry.artifact import ArtifactConfig
    from trainops.registry.lineage_data import Lineage

    config = ArtifactConfig(kind="checkpoint", created="2026-12-03T00:00:00Z", lineage=Lineage(git_commit="a" * 40))
    assert to_data(config) == config.model_dump(mode="json", by_alias=True)
    assert "schemaVersion" in to_data(config)
    assert to_data(Lineage(git_commit="a" * 40))["gitCommit"] == "a" * 40  # a dataclass: its fields in camelCase
    with pytest.raises(TypeError, match="cannot serialize object"):
        to_data(object())


@pytest.mark.parametrize(
    ("name", "expected"), [("bytes_freed", "bytesFreed"), ("runId", "runId"), ("a", "a"), ("x_y_z", "xYZ")]
)
def test_camel(name: str, expected: str) -> None:
    assert camel(name) == expected


def test_clock_formats() -> None:
    moment = datetime(2026, 12, 4, 14, 18, 12, 345678, tzinfo=timezone(timedelta(hours=1)))
    assert clock.iso(moment) == "2026-12-04T13:18:12.345Z"
    assert clock.iso(datetime(2026, 12, 4, 13, 18, 12)) == "2026-12-04T13:18:12.000Z"  # naive: taken as UTC
    assert clock.stamp(1764854292.9) == "2025-12-04T13:18:12Z"  # whole seconds, for reproducible digests
    assert clock.display("2026-12-04T13:18:12.345Z") == "2026-12-04 13:18:12Z"
    assert clock.display(None) == "" and clock.display("") == ""
    now = clock.iso()
    assert now.endswith("Z") and clock.parse(now) <= clock.now()


@pytest.mark.parametrize(
    "text",
    ["2026-12-04T13:18:12Z", "2026-12-04T13:18:12.345Z", "2026-12-04T14:18:12+01:00", "2026-12-04T13:18:12+0000"],
)
def test_clock_reads_both_precisions_and_offsets(text: str) -> None:
    parsed = clock.parse(text)
    assert parsed.tzinfo is not None and clock.display(parsed) == "2026-12-04 13:18:12Z"


@dataclass(frozen=True)
class Stamped:
    created: str | None
    ended: str
    note: str
    annotations: dict[str, str]


def test_json_times_have_one_precision() -> None:
    """An artifact's `created` is stamped to the second (its digest stays reproducible); in a
    document it reads to the millisecond, as every other time does. A mapping's values are
    data: an annotation says what the manifest says."""
    value = Stamped(
        created="2026-12-04T13:18:12Z",
        ended="2026-12-04T14:18:12.5+01:00",
        note="2026-12-04 is a date, not a time",
        annotations={"org.opencontainers.image.created": "2026-12-04T13:18:12Z"},
    )
    assert to_data(value) == {
        "created": "2026-12-04T13:18:12.000Z",
        "ended": "2026-12-04T13:18:12.500Z",
        "note": "2026-12-04 is a date, not a time",
        "annotations": {"org.opencontainers.image.created": "2026-12-04T13:18:12Z"},
    }
    assert to_data(Stamped(None, clock.stamp(0), "", {}))["ended"] == "1970-01-01T00:00:00.000Z"
