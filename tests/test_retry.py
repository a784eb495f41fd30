"""trainops.retry: the one backoff helper of every remote."""

from __future__ import annotations

import email.utils
import logging
import time

import pytest

from trainops.retry import Backoff, RetryPolicy, retry_after_seconds


def test_attempts_bound_the_retries_and_each_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff("GET http://h/x", policy=RetryPolicy(attempts=3, base=0.001, jitter=0.0, budget=10))
    with caplog.at_level(logging.WARNING, logger="trainops.retry"):
        assert backoff.wait("503 Service Unavailable")
        assert backoff.wait("connection refused")
        assert not backoff.wait("connection refused")  # 3 attempts in all: 2 retries
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "GET http://h/x failed (503 Service Unavailable); retry 1 of 2 in 0.0 s",
        "GET http://h/x failed (connection refused); retry 2 of 2 in 0.0 s",
    ]


def test_delays_grow_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(base=0.25, cap=1.0, jitter=0.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 1.0, 1.0]
    jittered = RetryPolicy(base=1.0, jitter=1.0)
    assert all(0.0 <= jittered.delay(1) <= 1.0 for _ in range(50))


def test_the_total_wait_is_bounded_by_the_budget() -> None:
    backoff = Backoff("x", policy=RetryPolicy(attempts=100, base=0.05, jitter=0.0, budget=0.12))
    started = time.monotonic()
    retries = 0
    while backoff.wait("down"):
        retries += 1
    took = time.monotonic() - started
    assert retries == 2 and backoff.waited == pytest.approx(0.12) and took < 1.0  # 0.05, then 0.07 of 0.1


def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOPS_RETRY_BUDGET", "0")
    assert not Backoff("x").wait("down")  # fail fast: no retry at all
    monkeypatch.setenv("TRAINOPS_RETRY_BUDGET", "7.5")
    assert Backoff("x").budget == 7.5


def test_retry_after_replaces_the_delay_and_too_long_gives_up(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff("GET u", policy=RetryPolicy(base=5.0, jitter=0.0, budget=1.0))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="trainops.retry"):
        assert backoff.wait("429 Too Many Requests", retry_after=0.2)
        assert time.monotonic() - started >= 0.2
        assert not backoff.wait("429 Too Many Requests", retry_after=30)
    assert caplog.records[0].getMessage().endswith("retry 1 of 5 in 0.2 s (Retry-After)")
    assert "asks to wait 30.0 s" in caplog.records[1].getMessage() and "giving up" in caplog.records[1].getMessage()


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    later = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= (retry_after_seconds(later) or 0) <= 10.0
    assert retry_after_seconds(email.utils.formatdate(time.time() - 100, usegmt=True)) == 0.0
