"""The tag index of an s3:// repository: every tag and its digest in SHARDS small objects.

Listing the tag objects of a repository costs one ListObjectsV2 page per 1,000 tags (and
on moto, the S3 server the tests use, a scan of the whole bucket per page plus about
0.2 ms per key returned): 10,000 tags took 3–4 s on a quiet machine however the client
parses. The index answers the same question with one LIST of an (almost always empty)
prefix and SHARDS GETs (shard 00 first, then the rest in parallel), whatever the number
of tags:

    <repo>/_tags/<00..0f>.json             {"shards": 16, "tags": {tag: digest or null}}
    <repo>/_tags/pending/<tag>/<uuid>      a tag write in flight (empty object)

`_tags` cannot be a repository name component (those start with [a-z0-9]), so the index
never shadows a nested repository. The tag objects (`<repo>/tags/<tag>`) stay the truth;
the index is a cache that writers keep exact, and readers can tell when it is not:

* A writer of tag t first PUTs a pending marker, then moves (or deletes) the tag object,
  then syncs t's shard: GET the shard, re-read the tag object, PUT If-Match the shard's
  ETag (412: another writer got there first, so read both again; a shard that is absent
  while shard 00 exists is empty, and created with If-None-Match: *). The marker is deleted
  only after the sync succeeded. Re-reading the tag object after reading the shard makes
  the last successful PUT of a shard hold the tag's latest value, whatever order
  concurrent writers of the same tag finish in.
* A reader LISTs the pending markers first, then GETs shard 00, then the others: a tag
  whose write is in flight (or whose writer died before its sync) is read from its tag
  object; any other tag's last write had synced its shard before its marker went. No
  shard 00 means no complete index (a repository written before the index existed, or a
  build cut short): the reader falls back to listing the tag objects.
* A writer that finds no shard 00 builds the index: it lists the tag objects, creates the
  shard of each with If-None-Match: * (names only, digests null: the listing carries
  none; each later write of a tag fills its digest), then shard 00 last, so that a reader
  who found shard 00 finds every shard the build made; then it syncs its own tag on top.
  Shards are only ever created that way or changed by a compare-and-swap with the truth
  re-read, so concurrent builders and writers never drop a tag. A small repository has
  one or two shard objects, not 16 (moto lists a whole bucket for every page: keys count).

The cost, and the trade-off: a tag write takes five more requests (marker PUT and DELETE,
shard GET and PUT, tag re-read) and rewrites one shard (1/16 of the index: about 55 KB at
10,000 tags); writers of one repository contend on 16 objects rather than on one tag.
Anything that changes tag objects behind trainops' back (an older trainops, `aws s3 rm`
of a tag, a sync from elsewhere) leaves the index stale until shard 00 is deleted (the
next tag write rebuilds the index; `aws s3 rm --recursive` of `_tags/` deletes 00 first).
A marker left by a killed writer costs readers one GET of that tag until `registry gc`
settles it (reported as an unfinished upload, `#tag-write`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any

from trainops.errors import TrainopsError
from trainops.registry.backends.s3.client import ConditionFailed, KeyMissing, S3Ops, Unsupported
from trainops.retry import Backoff, RetryPolicy

SHARDS = 16
INDEX_DIR = "_tags"
SYNC_ATTEMPTS = 100
INDEX_MEDIA_TYPE = "application/vnd.trainops.s3.tag-index.v1+json"

Entries = dict[str, str | None]  # tag -> digest (None: not known yet)


def shard_of(tag: str) -> int:
    return hashlib.sha256(tag.encode()).digest()[0] % SHARDS


def _dump(entries: Entries) -> bytes:
    return json.dumps({"shards": SHARDS, "tags": entries}, sort_keys=True, separators=(",", ":")).encode()


def _load(data: bytes) -> Entries | None:
    """The entries of a shard; None when it is not one this version understands."""
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or parsed.get("shards") != SHARDS or not isinstance(parsed.get("tags"), dict):
        return None
    return {str(k): v if isinstance(v, str) else None for k, v in parsed["tags"].items()}


def _apply(entries: Entries, tag: str, found: str | bool | None) -> bool:
    """Set tag's entry to what its object holds (False: no object); whether it changed."""
    if found is False:
        return entries.pop(tag, False) is not False
    value = found if isinstance(found, str) else None
    if tag in entries and entries[tag] == value:
        return False
    entries[tag] = value
    return True


class TagIndex:
    """The index of one backend's repositories (see the module docstring)."""

    def __init__(
        self,
        ops: S3Ops,
        *,
        pool: Callable[[], ThreadPoolExecutor],
        truth: Callable[[str, str], str | bool | None],
        names: Callable[[str], list[str]],
    ) -> None:
        """truth(repo, tag): the tag's digest, None if its object holds no descriptor, False
        if there is no tag object; names(repo): the tags listed from their objects."""
        self.ops = ops
        self.pool = pool
        self.truth = truth
        self.names = names

    @staticmethod
    def shard_key(repo: str, shard: int) -> str:
        return f"{repo}/{INDEX_DIR}/{shard:02x}.json"

    @staticmethod
    def pending_prefix(repo: str) -> str:
        return f"{repo}/{INDEX_DIR}/pending/"

    # -- writers ---------------------------------------------------------------------------
    @contextmanager
    def changing(self, repo: str, tag: str) -> Iterator[None]:
        """Around a change of tag's object: a pending marker while it is in flight, then the
        shard synced. The marker stays if the sync fails (readers then read the tag)."""
        marker = f"{self.pending_prefix(repo)}{tag}/{uuid.uuid4().hex}"
        self.ops.call("put_object", marker, Body=b"")
        try:
            yield
        finally:
            synced = False
            with suppress(TrainopsError):
                self.sync(repo, tag)
                synced = True
            if synced:
                self.ops.call("delete_object", marker)

    def _read(self, key: str) -> tuple[Entries | None, str] | None:
        """(entries, ETag) of a shard, None when it is absent."""
        try:
            data, etag, _ = self.ops.get_bytes(key)
        except KeyMissing:
            return None
        return _load(data), etag

    def sync(self, repo: str, tag: str) -> None:
        """Make tag's entry in its shard what its tag object says now (compare-and-swap)."""
        key = self.shard_key(repo, shard_of(tag))
        what = f"updating the tag index of s3://{self.ops.bucket}/{repo}"
        backoff = Backoff(what, policy=_CONTENTION, logger=_ROUTINE)
        built = False
        for _attempt in range(SYNC_ATTEMPTS):
            current = self._read(key)
            if current is None and not self._complete(repo, key):
                if built or not self.build(repo):  # built and gone again: someone removes it
                    return
                built = True
                continue
            entries, etag = current if current is not None else ({}, None)
            if entries is None:  # a shard this version cannot read: leave it to its writer
                return
            if not _apply(entries, tag, self.truth(repo, tag)):
                return
            try:  # a shard the build found empty is created by its first writer
                self._put(key, _dump(entries), **({"IfMatch": etag} if etag else {"IfNoneMatch": "*"}))
                return
            except ConditionFailed:
                backoff.wait("another writer changed the shard meanwhile")
        raise ConditionFailed(f"the tag index of s3://{self.ops.bucket}/{repo} kept changing")

    def _complete(self, repo: str, missing: str) -> bool:
        """Whether the index exists although the shard `missing` does not: shard 00, which a
        build creates last, is there (then the build found no tag for that shard)."""
        first = self.shard_key(repo, 0)
        if missing == first:
            return False
        try:
            self.ops.call("head_object", first)
        except KeyMissing:
            return False
        return True

    def build(self, repo: str) -> bool:
        """Create the shards of the tags listed from their objects (If-None-Match: *; names(repo)
        is [] for a repository this process created: no tag can predate it), then shard 00,
        empty or not, last: its presence says the index is complete. False when the server
        has no conditional writes (the index would not stay exact)."""
        by_shard: dict[int, Entries] = {}
        for name in self.names(repo):
            by_shard.setdefault(shard_of(name), {})[name] = None

        def create(shard: int) -> bool:
            try:
                self._put(self.shard_key(repo, shard), _dump(by_shard.get(shard, {})), IfNoneMatch="*")
            except ConditionFailed:  # another writer built it: it is kept
                pass
            except Unsupported:
                return False
            return True

        others = sorted(set(by_shard) - {0})
        return all(list(self.pool().map(create, others))) and create(0)

    def _put(self, key: str, body: bytes, **condition: str) -> None:
        self.ops.call("put_object", key, Body=body, ContentType=INDEX_MEDIA_TYPE, **condition)

    # -- readers ---------------------------------------------------------------------------
    def read(self, repo: str) -> Entries | None:
        """Every tag with its digest (None where not known yet), or None when the index is
        incomplete. Pending markers are listed first, then shard 00 is read (a build creates
        it last), then the other shards (absent ones are empty)."""
        pending = {key.split("/")[-2] for key in self.ops.keys(self.pending_prefix(repo), page_size=1000)}
        first = self._read(self.shard_key(repo, 0))
        if first is None or first[0] is None:
            return None
        merged: Entries = dict(first[0])
        for shard in self.pool().map(lambda i: self._read(self.shard_key(repo, i)), range(1, SHARDS)):
            if shard is None:
                continue
            if shard[0] is None:
                return None
            merged.update(shard[0])
        if pending:
            truths = list(self.pool().map(lambda t: (t, self.truth(repo, t)), sorted(pending)))
            for tag, found in truths:
                _apply(merged, tag, found)
        return merged

    # -- repair ----------------------------------------------------------------------------
    def stale_markers(self, repo: str) -> list[dict[str, Any]]:
        """The pending markers of the repository (objects with Key and LastModified)."""
        prefix = self.pending_prefix(repo)
        return [obj for objects, _ in self.ops.pages(prefix, page_size=1000) for obj in objects]

    def settle(self, repo: str, marker_key: str) -> None:
        """Sync the tag a leftover marker names with its object, then drop the marker."""
        tag = marker_key.split("/")[-2]
        self.sync(repo, tag)
        self.ops.call("delete_object", marker_key)


_CONTENTION = RetryPolicy(attempts=SYNC_ATTEMPTS, base=0.005, cap=0.5, jitter=1.0)


class _RoutineLog(logging.Logger):
    """Writers of one repository meet on its 16 shards all the time: their retries are
    logged at DEBUG, not as the warnings other retries are."""

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.debug(msg, *args, **kwargs)


_ROUTINE = _RoutineLog(__name__)
_ROUTINE.parent = logging.getLogger("trainops")
