"""The run id, one home: made (`new`), validated (`check`), parsed (`parse`), or taken as
given else made (`given_or_new`, what every command with --run-id does).

A run id is a DNS label: it is a label value (trainops.dev/run-id) and part of the rendered
objects' names. One that trainops makes is `<prefix>-<YYYYmmdd>-<HHMMSS>-<6 hex>`: sortable
by its start time (UTC), unique across machines; a user's own (--run-id) only has to be a
DNS label, so `parse` says what a made one carries and None for any other.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone

from trainops import clock
from trainops.errors import InputError

MAX_LENGTH = 63
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MADE = re.compile(r"^(?P<prefix>[a-z0-9][-a-z0-9]*)-(?P<time>\d{8}-\d{6})-(?P<suffix>[0-9a-f]{6})$")
_TIME = "%Y%m%d-%H%M%S"


@dataclass(frozen=True)
class RunId:
    """What a run id trainops made carries: its prefix (run, local, eval), start time and random suffix."""

    prefix: str
    started: datetime
    suffix: str


def new(prefix: str = "run") -> str:
    """A fresh run id: DNS-label safe, sortable by time, unique across machines."""
    return check(f"{prefix}-{clock.now().strftime(_TIME)}-{secrets.token_hex(3)}")


def check(run_id: str) -> str:
    """`run_id` itself when it is a DNS label (it is a label value and part of object names)."""
    if not isinstance(run_id, str) or len(run_id) > MAX_LENGTH or not _DNS_LABEL.match(run_id):
        raise InputError(
            f"run id {run_id!r} is not a DNS label",
            hint="use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
        )
    return run_id


def given_or_new(run_id: str | None, prefix: str = "run") -> str:
    """The run id given (checked), else a new one with `prefix`."""
    return check(run_id) if run_id else new(prefix)


def parse(run_id: str) -> RunId | None:
    """The parts of a run id trainops made; None for one named by hand."""
    match = _MADE.match(check(run_id))
    if match is None:
        return None
    try:
        started = datetime.strptime(match["time"], _TIME).replace(tzinfo=timezone.utc)
    except ValueError:  # digits that are no date: a name, not a made id
        return None
    return RunId(prefix=match["prefix"], started=started, suffix=match["suffix"])
