"""One retry/backoff helper for every remote trainops talks to (OCI, S3, git push, …).

The API is three names:

    from trainops.retry import Backoff, RetryPolicy, retry_after_seconds

    backoff = Backoff(f"GET {url}")                  # the default RetryPolicy
    while True:
        try:
            return send()
        except TransientFailure as err:             # 5xx, 429, a dropped connection …
            if not backoff.wait(str(err), retry_after=retry_after_seconds(err.header)):
                raise RemoteError(f"{url} kept failing: {err}") from None

- `Backoff(what, policy=…)` counts the failures of one operation. `wait(reason)` logs one
  WARNING line (the CLI shows it on stderr) such as
  `GET https://h/v2/… failed (503 Service Unavailable); retry 2 of 5 in 0.5 s` and sleeps;
  it returns False, without sleeping, when the attempts or the total waiting time
  (`RetryPolicy.budget`) are used up: the caller then raises its own error.
  `next_delay(reason)` does the same but returns the wait (or None) for a caller that
  sleeps itself (botocore's retry hook in the s3 backend).
- Delays grow exponentially from `base`, capped at `cap`, with jitter (`jitter` = the
  fraction of the delay that is random; 1.0 is "full jitter", for writers that collide).
- A server's `Retry-After` (seconds or an HTTP date; `retry_after_seconds` parses the
  header) replaces the computed delay. When it asks for more than the budget has left,
  the operation gives up at once rather than sleep past the budget.
- `TRAINOPS_RETRY_BUDGET` (seconds) overrides the default budget, e.g. `0` to fail fast.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import time
from dataclasses import dataclass

from trainops.interrupt import cancelled

log = logging.getLogger(__name__)

BUDGET_ENV = "TRAINOPS_RETRY_BUDGET"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})  # HTTP statuses worth another attempt


def _default_budget() -> float:
    text = os.environ.get(BUDGET_ENV, "").strip()
    try:
        return max(0.0, float(text)) if text else 30.0
    except ValueError:
        return 30.0


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one operation."""

    attempts: int = 6  # tries in all, the first one included
    base: float = 0.25  # seconds before the first retry
    cap: float = 8.0  # no single wait is longer
    budget: float | None = None  # seconds of waiting in all (None: TRAINOPS_RETRY_BUDGET, else 30)
    jitter: float = 0.5  # 0: fixed delays; 1: uniform in [0, delay]

    def delay(self, retry: int) -> float:
        """The wait before retry number `retry` (1, 2, …), jitter applied."""
        full = min(self.cap, self.base * 2.0 ** (retry - 1))
        return full * (1.0 - self.jitter * random.random())


class Backoff:
    """The failures of one operation: logs each retry and waits, within the policy."""

    def __init__(self, what: str, *, policy: RetryPolicy | None = None, logger: logging.Logger | None = None) -> None:
        self.what = what
        self.policy = policy or RetryPolicy()
        self.budget = self.policy.budget if self.policy.budget is not None else _default_budget()
        self.failures = 0
        self.waited = 0.0
        self._log = logger or log

    def wait(self, reason: str, *, retry_after: float | None = None) -> bool:
        """After a failure: log and sleep before the next attempt; False when out of retries."""
        delay = self.next_delay(reason, retry_after=retry_after)
        if delay is None:
            return False
        time.sleep(delay)
        return True

    def next_delay(self, reason: str, *, retry_after: float | None = None) -> float | None:
        """As wait, for a caller that sleeps itself (botocore): the wait, logged, or None
        (also at once after Ctrl-C: a cancelled transfer is not retried)."""

        if cancelled():
            return None
        self.failures += 1
        retries = self.policy.attempts - 1
        if self.failures > retries:
            return None
        left = self.budget - self.waited
        if retry_after is not None:
            if retry_after > left:
                self._log.warning(
                    "%s failed (%s); the server asks to wait %.1f s, more than the %.1f s left of %s=%g: giving up",
                    self.what, reason, retry_after, max(left, 0.0), BUDGET_ENV, self.budget,
                )  # fmt: skip
                return None
            delay, why = retry_after, " (Retry-After)"
        else:
            if left <= 0:
                return None
            delay, why = min(self.policy.delay(self.failures), left), ""
        self._log.warning(
            "%s failed (%s); retry %d of %d in %.1f s%s", self.what, reason, self.failures, retries, delay, why
        )
        self.waited += delay
        return delay


def retry_after_seconds(value: str | None) -> float | None:
    """The seconds a `Retry-After` header asks for (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())
