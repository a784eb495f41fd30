"""Leases: how `registry gc` and the pushes in flight keep out of each other's way.

A push's blobs are unreferenced until its manifest is written, and a push skips a blob the
repository already has: gc must not delete, while a push is between its first blob check
and its manifest, any blob of that repository. Two markers beside the repository's content
(file:// `<repo>/.trainops/`, s3:// `<repo>/_trainops/`; oci:// keeps none, as its
registry's own garbage collector reclaims blobs) settle it:

- A push (store.push, copy, assemble; an eval report, a pruned record) holds a *lease*
  from before its first blob check until its manifest is written or it fails: `writing()`.
  It writes the lease, THEN reads the repository's gc lock; while a live gc holds it, the
  push waits (logged like a retry, bounded by GC_WAIT) and checks nothing.
- gc takes the *gc lock* of every repository it may delete in (an exclusive create:
  O_CREAT|O_EXCL, S3 If-None-Match: *), THEN lists each one's leases, THEN reads the
  registry; a repository with a fresh lease is left whole for this run. `GcLocks`. (It
  looks at the leases before the lock too, and does not lock a repository a push holds:
  a push waiting for one gc run is not made to wait for the next.)

Why this is race-free: the push writes (lease) then reads (lock); gc writes (lock) then
reads (leases); both stores are read-after-write consistent. If the lease was written
before gc listed leases, gc sees it and deletes nothing in the repository. Otherwise gc's
lock was written before that listing, so before the lease, so before the push read the
lock: the push sees it and waits until gc is done, so it checks for blobs only after gc's
last delete. A push that finished before gc listed leases wrote its manifest before gc read
the registry, so gc counts it. Either way no blob a push relies on disappears under it.

Heartbeats: a lease is re-written every LEASE_REFRESH seconds; gc treats one untouched for
its grace period (`--grace`, an hour by default) as a killed push's and removes it. gc
touches its lock every LOCK_REFRESH seconds; a lock untouched for LOCK_TTL is a dead gc's:
pushes stop waiting for it and the next gc takes it over. A gc that could not touch its
lock for LOCK_TTL / 2 stops before its next delete (GcLockLost).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from trainops import clock
from trainops.errors import RemoteError, TrainopsError

if TYPE_CHECKING:
    from trainops.registry.backends.base import Backend

log = logging.getLogger(__name__)

LEASE_REFRESH = 30.0  # seconds between a push's lease heartbeats
LOCK_REFRESH = 10.0  # seconds between gc's lock heartbeats
LOCK_TTL = 60.0  # a gc lock untouched this long belongs to a gc that died
GC_WAIT = 900.0  # the longest a push waits for a live gc to release its repository


class GcLockLost(RemoteError):
    """gc could not keep its lock fresh: it stops before deleting anything more."""


def owner_token(what: str) -> str:
    """Who holds a lease or lock: pid, host, start time, and a token no one else has."""
    return f"{what} pid {os.getpid()} on {socket.gethostname()} since {clock.iso()} {uuid.uuid4().hex}"


class Heartbeat:
    """Call beat() every interval seconds on a daemon thread until stopped; `fresh_for`
    says how long ago the last beat (or the start) succeeded."""

    def __init__(self, interval: float, beat: Callable[[], bool]) -> None:
        self._interval, self._beat = interval, beat
        self._stop = threading.Event()
        self.last_ok = time.monotonic()
        self.lost = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="trainops-heartbeat")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                ok = self._beat()
            except TrainopsError as err:  # a network blip: the next beat may succeed
                log.debug("heartbeat failed: %s", err)
                continue
            if ok:
                self.last_ok = time.monotonic()
            else:
                self.lost = True

    def fresh_for(self) -> float:
        return time.monotonic() - self.last_ok

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def writing(backend: Backend, repo: str, *, wait: float | None = None) -> Iterator[None]:
    """Hold a lease on repo while a push checks for, uploads and references its blobs.

    Writes the lease, then waits while a live gc holds the repository's lock; the lease is
    refreshed while the body runs and removed when it ends, however it ends."""
    name, owner = uuid.uuid4().hex, owner_token("push")
    backend.put_lease(repo, name, owner)
    try:
        _wait_for_gc(backend, repo, GC_WAIT if wait is None else wait)

        def refresh() -> bool:
            backend.put_lease(repo, name, owner)
            return True

        beat = Heartbeat(LEASE_REFRESH, refresh)
        try:
            yield
        finally:
            beat.stop()
    finally:
        with suppress(TrainopsError):  # a leftover lease only delays gc until the grace ends
            backend.drop_lease(repo, name)


def _wait_for_gc(backend: Backend, repo: str, wait: float) -> None:
    from trainops.retry import Backoff, RetryPolicy  # lazy: loads email

    backoff = Backoff(f"writing to {repo}", policy=RetryPolicy(attempts=1000, base=0.05, cap=2.0, budget=wait))
    while (held := backend.gc_lock(repo)) is not None and held.touched >= time.time() - LOCK_TTL:
        who = held.owner.rsplit(" ", 1)[0] or "a gc run"
        if not backoff.wait(f"`registry gc` ({who}) holds the repository's lock"):
            raise RemoteError(
                f"{repo}: `registry gc` ({who}) kept its lock for more than {wait:.0f} s",
                hint="wait for the gc run to finish, then push again; nothing was written",
            )


class GcLocks:
    """gc's side: the gc lock of each repository, then its leases (in that order). A
    context manager: the locks are released when gc is done, however it ends.

    `usable` are the repositories gc may delete in; `busy` maps the others to why not (a
    fresh lease, another gc's lock). A dry run takes no lock but reports the same. Stale
    leases (untouched for the grace period) are in `stale`, for gc to remove."""

    def __init__(self, backend_of: Callable[[str], Backend], repos: list[str], *, grace: float, dry_run: bool) -> None:
        self._backend_of, self._dry_run = backend_of, dry_run
        self._owner = owner_token("gc")
        self.held: list[str] = []
        self.usable: set[str] = set()
        self.busy: dict[str, str] = {}
        self.stale: dict[str, list[str]] = {}
        self._beat: Heartbeat | None = None
        try:
            self._take(repos, grace)
        except BaseException:
            self.release()
            raise
        self._beat = Heartbeat(LOCK_REFRESH, self._refresh) if self.held else None

    def __enter__(self) -> GcLocks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _take(self, repos: list[str], grace: float) -> None:
        """A repository with a push in flight is passed over without locking it: a push
        that waits for an earlier gc has its lease written, so gc runs back to back never
        starve it. The leases listed after the lock are the ones that count."""
        for repo in repos:
            backend = self._backend_of(repo)
            if not self._dry_run:
                if self._in_flight(backend, repo, grace):
                    continue
                if not backend.take_gc_lock(repo, self._owner, stale_before=time.time() - LOCK_TTL):
                    self.busy[repo] = "another gc run holds its lock"
                    continue
                self.held.append(repo)
            if not self._in_flight(backend, repo, grace):
                self.usable.add(repo)

    def _in_flight(self, backend: Backend, repo: str, grace: float) -> bool:
        """Whether a fresh lease names repo (then busy says so); stale ones go to stale."""
        now = time.time()
        leases = backend.list_leases(repo)
        fresh = [lease for lease in leases if lease.touched >= now - grace]
        self.stale[repo] = [lease.name for lease in leases if lease.touched < now - grace]
        if fresh:
            self.busy[repo] = f"{len(fresh)} push(es) in flight: its blobs and artifacts are left for a later run"
        return bool(fresh)

    def _refresh(self) -> bool:
        return all([self._backend_of(repo).refresh_gc_lock(repo, self._owner) for repo in self.held])

    def check(self) -> None:
        """Before each delete: the locks are still gc's and fresh, or GcLockLost."""
        if self._beat is None:
            return
        if self._beat.lost or self._beat.fresh_for() > LOCK_TTL / 2:
            raise GcLockLost(
                f"gc could not keep its lock fresh for {self._beat.fresh_for():.0f} s: stopped before deleting more",
                hint="run gc again; what it removed so far was garbage",
            )

    def release(self) -> None:
        if self._beat is not None:
            self._beat.stop()
        for repo in self.held:
            with suppress(TrainopsError):  # left behind, it goes stale in LOCK_TTL
                self._backend_of(repo).release_gc_lock(repo, self._owner)
        self.held = []
