"""The one UTC clock and the one time format.

JSON, artifacts and records: ISO 8601 UTC with `Z`, to the millisecond
(`2026-12-04T13:18:12.345Z`), so two events within a second still sort. Tables:
`display` (`2026-12-04 13:18:12Z`), never cut by a table's width.

One exception, on purpose: a time that is part of content-addressed output (an artifact's
`created` from SOURCE_DATE_EPOCH or its files' mtimes, an image's from the commit time) is
a whole number of seconds and is written by `stamp` to the second, the form it always had:
the same content keeps the same digest across trainops versions. `parse` reads both.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

_TIME_TEXT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def now() -> datetime:
    """Now, as an aware UTC datetime."""
    return datetime.now(timezone.utc)


def iso(moment: datetime | None = None) -> str:
    """`moment` (default: now) as `YYYY-MM-DDTHH:MM:SS.mmmZ`; a naive datetime is taken as UTC."""
    moment = now() if moment is None else moment
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def at(epoch: float) -> datetime:
    """Seconds since the epoch as an aware UTC datetime."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


def stamp(epoch: float) -> str:
    """A reproducible time (whole seconds) for content-addressed output: `YYYY-MM-DDTHH:MM:SSZ`."""
    return at(int(epoch)).isoformat(timespec="seconds").replace("+00:00", "Z")


def now_utc() -> str:
    """Now in the one format (`iso()`)."""
    return iso()


def parse(text: str) -> datetime:
    """An ISO 8601 time written by trainops (or any `Z`/offset form) → aware UTC datetime."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def one_precision(text: str) -> str:
    """A time as text (a stamp to the second, an offset) in the one JSON form, `iso`'s;
    any other text as it is. Documents show every time so, stamps included."""
    return iso(parse(text)) if _TIME_TEXT.match(text) else text


def display(text: str | datetime | None) -> str:
    """A time for a table: `2026-12-04 13:18:12Z` (seconds, UTC, marked); '' for none."""
    if text is None or text == "":
        return ""
    moment = parse(text) if isinstance(text, str) else text
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
