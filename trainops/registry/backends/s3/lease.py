"""Leases and the gc lock of the s3:// backend (the protocol is in trainops/registry/retention/lease.py).

    <repo>/_trainops/leases/<name>    a push in flight; LastModified is its heartbeat
    <repo>/_trainops/gc-lock          a gc run deleting in this repository (its owner's token)

The lock is taken with PutObject If-None-Match: * (of two gc runs, one wins), a dead gc's
lock is replaced with If-Match: <its ETag>, and released with a DeleteObject If-Match, so a
lock another gc took over is never removed by the one that lost it.
"""

from __future__ import annotations

from typing import Any

from trainops.errors import InputError
from trainops.registry.backends.base import Lease
from trainops.registry.backends.s3.client import ConditionFailed, KeyMissing, S3Ops, Unsupported

LEASE_NAME_LENGTH = 32  # a uuid4's hex


def _epoch(value: Any) -> float:
    """A boto3 timestamp (a datetime) as seconds since the epoch; 0 when absent."""
    return float(value.timestamp()) if hasattr(value, "timestamp") else 0.0


class S3Leases:
    """Mixed into S3Backend: it provides ops, page_size and _key."""

    ops: S3Ops
    page_size: int

    @staticmethod
    def _key(repo: str, *rest: str) -> str:
        raise NotImplementedError

    def _lease_key(self, repo: str, name: str) -> str:
        if len(name) != LEASE_NAME_LENGTH or not all(c in "0123456789abcdef" for c in name):
            raise InputError(f"{name!r} is not a lease name", hint="lease names are 32 lowercase hex digits")
        return self._key(repo, "_trainops", "leases", name)

    def put_lease(self, repo: str, name: str, owner: str) -> None:
        """A plain PUT: LastModified is the heartbeat."""
        self.ops.call("put_object", self._lease_key(repo, name), Body=owner.encode(), ContentType="text/plain")

    def drop_lease(self, repo: str, name: str) -> None:
        self.ops.call("delete_object", self._lease_key(repo, name))

    def list_leases(self, repo: str) -> list[Lease]:
        """One listing (LastModified comes with it); owners are not read."""
        prefix = self._key(repo, "_trainops", "leases", "")
        return [
            Lease(str(o["Key"])[len(prefix) :], _epoch(o.get("LastModified")))
            for objects, _ in self.ops.pages(prefix, page_size=self.page_size)
            for o in objects
        ]

    def _read_gc_lock(self, repo: str) -> tuple[Lease, str] | None:
        try:
            resp = self.ops.call("get_object", self._key(repo, "_trainops", "gc-lock"))
        except KeyMissing:
            return None
        with resp["Body"] as body:
            owner = body.read().decode(errors="replace")
        return Lease("gc-lock", _epoch(resp.get("LastModified")), owner), str(resp.get("ETag") or "")

    def _write_gc_lock(self, repo: str, owner: str, **condition: str) -> bool:
        """A conditional PUT of the lock; False when the condition failed. A server without
        conditional writes gets a plain PUT, then a read-back: the last writer holds it."""
        key = self._key(repo, "_trainops", "gc-lock")
        try:
            resp = self.ops.call("put_object", key, Body=owner.encode(), ContentType="text/plain", **condition)
            self._etags()[(repo, owner)] = str(resp.get("ETag") or "")
            return True
        except ConditionFailed:
            return False
        except Unsupported:
            self.ops.call("put_object", key, Body=owner.encode(), ContentType="text/plain")
            held = self._read_gc_lock(repo)
            return held is not None and held[0].owner == owner

    def take_gc_lock(self, repo: str, owner: str, *, stale_before: float) -> bool:
        """PutObject If-None-Match: *; a dead gc's lock is replaced with If-Match: its ETag."""
        if self._write_gc_lock(repo, owner, IfNoneMatch="*"):
            return True
        held = self._read_gc_lock(repo)
        if held is None:  # released meanwhile
            return self._write_gc_lock(repo, owner, IfNoneMatch="*")
        if held[0].touched >= stale_before:
            return False
        return self._write_gc_lock(repo, owner, IfMatch=held[1])

    def _etags(self) -> dict[tuple[str, str], str]:
        """(repo, owner) → the ETag of the lock this backend last wrote for that owner."""
        if "_gc_etags" not in self.__dict__:
            self.__dict__["_gc_etags"] = {}
        found: dict[tuple[str, str], str] = self.__dict__["_gc_etags"]
        return found

    def refresh_gc_lock(self, repo: str, owner: str) -> bool:
        """One PUT If-Match: the ETag of our last write; else read the lock first."""
        etag = self._etags().get((repo, owner))
        if etag and self._write_gc_lock(repo, owner, IfMatch=etag):
            return True
        held = self._read_gc_lock(repo)
        if held is None or held[0].owner != owner:
            return False
        return self._write_gc_lock(repo, owner, IfMatch=held[1])

    def release_gc_lock(self, repo: str, owner: str) -> None:
        self._etags().pop((repo, owner), None)
        held = self._read_gc_lock(repo)
        if held is None or held[0].owner != owner:
            return
        key = self._key(repo, "_trainops", "gc-lock")
        try:
            self.ops.call("delete_object", key, IfMatch=held[1])
        except ConditionFailed:
            return  # another gc took it over meanwhile: it is theirs now
        except Unsupported:
            self.ops.call("delete_object", key)

    def gc_lock(self, repo: str) -> Lease | None:
        held = self._read_gc_lock(repo)
        return held[0] if held else None
