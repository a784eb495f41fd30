"""The run id's one home: made, checked and parsed by trainops.runid."""

from __future__ import annotations

from datetime import timedelta

import pytest

from trainops import clock, runid
from trainops.errors import InputError


def test_a_new_run_id_parses_back_to_its_prefix_and_start() -> None:
    before = clock.now().replace(microsecond=0)
    made = runid.new("local")
    parts = runid.parse(made)
    assert parts is not None and parts.prefix == "local" and len(parts.suffix) == 6
    assert before <= parts.started <= clock.now() + timedelta(seconds=1)
    assert made.startswith(f"local-{parts.started:%Y%m%d-%H%M%S}-")


def test_two_new_run_ids_differ() -> None:
    assert runid.new() != runid.new()


def test_a_given_run_id_is_kept_and_checked() -> None:
    assert runid.given_or_new("mine-1", "run") == "mine-1"
    assert runid.given_or_new(None, "eval").startswith("eval-")
    with pytest.raises(InputError, match="run id 'Mine_1' is not a DNS label"):
        runid.given_or_new("Mine_1", "run")
    with pytest.raises(InputError, match="is not a DNS label"):
        runid.check("a" * 64)


def test_a_hand_named_run_id_has_no_parts() -> None:
    assert runid.parse("mine-1") is None
    assert runid.parse("run-20251399-000000-abcdef") is None  # no 99th of the 13th month
    parts = runid.parse("run-2-20250101-000000-abc123")
    assert parts is not None and parts.prefix == "run-2"
