"""The hang clock: when the trainer last showed progress on disk."""

from __future__ import annotations

import time
from pathlib import Path

# The file a trainer may touch to show it is alive (set by the supervisor in its environment).
HEARTBEAT_ENV = "TRAINOPS_HEARTBEAT_FILE"


class ProgressClock:
    """When the trainer last showed progress: a change in the checkpoint directory (a new
    checkpoint, a file in it), in the heartbeat file's mtime, or a metrics line (`touch`)."""

    def __init__(self, ckpt_dir: Path, heartbeat: Path, timeout: float) -> None:
        self.ckpt_dir = ckpt_dir
        self.heartbeat = heartbeat
        self.timeout = timeout
        self.seen = self._fingerprint()
        self.last = time.monotonic()

    def _fingerprint(self) -> float:
        newest = 0.0
        paths = [self.heartbeat, self.ckpt_dir]
        if self.ckpt_dir.is_dir():
            paths += list(self.ckpt_dir.iterdir())
        for path in paths:
            try:
                newest = max(newest, path.stat().st_mtime)
            except OSError:
                continue
        return newest

    def touch(self) -> None:
        """Progress seen elsewhere (a metrics line): the clock starts over."""
        self.last = time.monotonic()

    def __call__(self) -> str | None:
        """The watchdog: None while progress is recent, else why the trainer counts as hung."""
        now = time.monotonic()
        current = self._fingerprint()
        if current != self.seen:
            self.seen, self.last = current, now
            return None
        if now - self.last < self.timeout:
            return None
        return f"no new checkpoint or heartbeat for {self.timeout:g} s (faultTolerance.hangTimeout)"
