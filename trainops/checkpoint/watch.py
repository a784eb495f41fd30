"""Watch a training output directory and push every complete checkpoint, once, in order.

A scan lists the directory with its layout, keeps the checkpoints that are complete by
the layout's rule, and pushes those not pushed yet (oldest first) to
`<repository>:step-<step>`, each with lineage: the base lineage, the run, the step, the
metrics and its parent — the previous checkpoint of this directory, or, for the first
one after a resume, the checkpoint training resumed from ("resumed-from"). What was
pushed is remembered in `.trainops/pushed.json`, so a restarted watcher pushes nothing
twice; a checkpoint whose files changed (same name, new fingerprint) is pushed again.

A checkpoint is re-checked right before it is published and the store refuses files that
change while they are sent, so a half-written checkpoint is never published. A tag that
already holds the same files (a restored checkpoint, a push whose record was lost) is
adopted instead of pushed again; one that holds another run's checkpoint is not
overwritten, unless the run is a fresh start that takes the tags over (`take_over`).

The first scan is the start-up pass: what the directory already holds was written before
this watcher started, so checkpoints without a commit marker (Hugging Face) count once
their state file is whole, without waiting to settle, and every pushed one is checked by
its full fingerprint (later scans compare the directory's inode and mtime first). The
newest complete checkpoint then is what training resumes from (`resumed_from`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from trainops import clock
from trainops.checkpoint.catalog import A_LAYOUT, A_NAME, require_repository
from trainops.checkpoint.layouts import LAYOUT_NAMES, Found, Layout, get_layout, resolve_layout
from trainops.checkpoint.retention import apply_retention
from trainops.checkpoint.state import (
    Fingerprint,
    Record,
    fingerprint,
    load_pushed,
    load_restored,
    locked,
    quick_key,
    save_pushed,
)
from trainops.errors import ExistsError, InputError, NotFoundError, TrainopsError, UsageError
from trainops.manifest import Manifest
from trainops.manifest.stages import Retention
from trainops.podenv import PodEnvironment
from trainops.registry import store
from trainops.registry.artifact import ParsedManifest, scan_tree
from trainops.registry.chunks.index import files_of
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.digestcache import DigestCache
from trainops.registry.lineage_data import Lineage, Parent, Relation
from trainops.registry.reference import Reference

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PushedCheckpoint:
    name: str
    step: int
    digest: str
    ref: str  # repo:step-N@sha256:…
    parent: Parent | None
    bytes_sent: int


@dataclass
class WatchConfig:
    directory: Path
    repository: Reference  # a repository: no tag, no digest
    run_id: str
    layout: str = "auto"  # auto | trainops | huggingface | megatron | deepspeed | dcp
    keep: Retention | None = None  # None: keep every checkpoint
    lineage: Lineage | None = None  # base lineage (pipeline, gitCommit, imageDigest) of every push
    interval: float = 10.0  # seconds between scans
    settle: float = 5.0  # seconds a checkpoint without a commit marker must be unchanged
    drain: float = 0.0  # after stop: seconds to keep scanning while a checkpoint is being written
    image: Reference | None = None  # the training image, pinned: the `image` parent when it is in its repository
    dedup: str = "off"  # chunks: the chunked form (train.checkpoint.dedup)
    # a fresh start (`trainops run --fresh`): this run's step-N tags replace another run's
    take_over: bool = False
    # after each push (release.signing.checkpoints): SLSA provenance, signed when there is a
    # key (trainops.signing.attest.checkpoint_attester makes it; the watcher does not sign)
    attest: Callable[[Reference], None] | None = None


EventKind = Literal["pushed", "adopted", "removed", "kept", "skipped", "error"]


@dataclass(frozen=True)
class WatchEvent:
    """Something a scan did, for a caller that reports progress as it happens."""

    kind: EventKind
    message: str
    checkpoint: PushedCheckpoint | None = None


@dataclass
class WatchResult:
    pushed: list[PushedCheckpoint] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    scans: int = 0
    resumed_from: Parent | None = None
    final_error: str | None = None  # the final scan failed: some checkpoint may not be pushed


class _Transient(Exception):
    """The checkpoint changed or vanished while we looked: try again next scan."""


class Watcher:
    """Pushes the complete checkpoints of one directory to one repository."""

    def __init__(
        self,
        registries: Registries,
        config: WatchConfig,
        *,
        progress: ProgressSink | None = None,
        on_event: Callable[[WatchEvent], None] | None = None,
    ) -> None:
        require_repository(config.repository)
        if not config.run_id:
            raise InputError("a checkpoint watcher needs a run id", hint="pass --run-id or set TRAINOPS_RUN_ID")
        if config.layout not in LAYOUT_NAMES:
            get_layout(config.layout)  # raises with the list of layouts
        self.registries = registries
        self.config = config
        self.directory = config.directory.absolute()
        self.resumed_from: Parent | None = None  # known after the first scan
        self.resumed_step: int | None = None  # the step of the newest complete checkpoint at start-up
        self._progress = progress
        self._on_event = on_event
        self._layout: Layout | None = None
        self._started = False
        self._seen: dict[str, tuple[str, float]] = {}  # name → (fingerprint, first seen), for settling
        self._settle_due: float | None = None
        self._writing = False
        self._last_digest: str | None = None
        self._cache = DigestCache()
        self._removed: list[str] = []
        self._kept_said: set[str] = set()  # what retention kept for another artifact, said once
        self._reported: BaseException | None = None
        self._image_parents: list[Parent] | None = None  # found on the first push

    def _image_parent(self) -> list[Parent]:
        """The training image as an `image` parent, when the registry holds it (looked up once):
        lineage then walks from a checkpoint to the image, and on to its commit and base. An
        image elsewhere (a registry this one cannot read, a placeholder digest) is only the
        lineage's imageDigest."""
        if self._image_parents is not None:
            return self._image_parents
        found: list[Parent] = []
        image = self.config.image
        if image is not None and image.digest:
            try:
                store.resolve(self.registries, ref=image)
            except TrainopsError as err:
                log.info("the training image %s is not in its registry (%s): no image parent", image, err)
            else:
                found.append(Parent(digest=image.digest, ref=str(image.with_digest(None)), relation="image"))
        self._image_parents = found
        return found

    # -- the loop ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> WatchResult:
        """Scan every interval until stop is set, then scan a final time (and, with drain,
        keep scanning while a checkpoint is still being written)."""
        result = WatchResult()
        while not stop.is_set():
            self._scan_into(result, final=False)
            if stop.wait(self._next_wait()):
                break
        result.final_error = self._scan_into(result, final=True)
        deadline = time.monotonic() + self.config.drain
        while self._writing and time.monotonic() < deadline:
            time.sleep(min(self.config.interval, max(0.0, deadline - time.monotonic())))
            result.final_error = self._scan_into(result, final=True)
        result.resumed_from = self.resumed_from
        return result

    def _scan_into(self, result: WatchResult, *, final: bool) -> str | None:
        result.scans += 1
        before = len(self._removed)
        try:
            result.pushed.extend(self.scan(final=final))
            error = None
        except (TrainopsError, OSError) as err:
            error = str(err)
            result.errors.append(error)
            if err is not self._reported:  # a checkpoint's own error was reported as it happened
                self._emit("error", error)
        result.removed.extend(self._removed[before:])
        return error

    def _next_wait(self) -> float:
        wait = self.config.interval
        if self._settle_due is not None:
            wait = min(wait, max(0.01, self._settle_due - time.monotonic()))
        return wait

    # -- one scan ---------------------------------------------------------------------

    def scan(self, *, final: bool = False) -> list[PushedCheckpoint]:
        """One pass: push every complete checkpoint not pushed yet, oldest first, then apply
        retention. final: the writer has exited, so a checkpoint without a commit marker
        needs no settling. The first scan also works out what training resumes from."""
        if not self.directory.is_dir():  # not written yet: training starts from scratch
            self._started = True
            self._writing = False
            return []
        with locked(self.directory):
            return self._scan(final)

    def _scan(self, final: bool) -> list[PushedCheckpoint]:
        startup = not self._started
        if self._layout is None:
            self._layout = resolve_layout(self.config.layout, self.directory)
        layout = self._layout
        if layout is None:  # auto, and nothing written yet
            self._started = True
            self._writing = False
            return []
        listing = layout.listing(self.directory)
        self._writing = listing.writing
        self._settle_due = None
        records = load_pushed(self.directory)
        restored = load_restored(self.directory)
        pushed: list[PushedCheckpoint] = []
        errors: list[TrainopsError] = []
        newest_complete: Found | None = None
        now = time.monotonic()
        for found in listing.found:
            if not found.committed:
                continue
            try:
                outcome = self._consider(found, listing.found, layout, records, restored, startup, final, now)
            except _Transient as why:
                self._emit("skipped", f"{found.name}: {why}; trying again next scan")
                continue
            except (NotFoundError, ExistsError, InputError) as err:
                errors.append(err)
                self._emit("error", f"{found.name}: {err}")
                continue
            if outcome is None:
                continue  # not complete yet
            newest_complete = found
            if isinstance(outcome, PushedCheckpoint):
                pushed.append(outcome)
        if startup:
            self._started = True
            self.resumed_from = self._resume_point(newest_complete, records, restored)
            self.resumed_step = newest_complete.step if newest_complete is not None else None
        if self.config.keep is not None and (pushed or startup):
            self._retain(self.config.keep)
        if errors:
            self._reported = errors[0]
            raise errors[0]
        return pushed

    def _consider(
        self,
        found: Found,
        siblings: list[Found],
        layout: Layout,
        records: dict[str, Record],
        restored: Record | None,
        startup: bool,
        final: bool,
        now: float,
    ) -> PushedCheckpoint | Record | None:
        """Push one committed checkpoint if it is complete and not pushed yet. Returns the
        push, the record of an earlier push or restore, or None if it is not complete."""
        repo_url = self.config.repository.repo_url
        record = records.get(found.name)
        if record is not None and record.repository != repo_url:
            record = None
        try:
            if record is not None and not startup and record.quick == quick_key(found.path):
                return record  # unchanged since it was pushed (full check at start-up)
            if not self._complete(found, siblings, startup or final, now):
                return None
            fp = fingerprint(found.path)
        except FileNotFoundError:
            raise _Transient("it was removed") from None
        if fp.files == 0:
            return None
        if record is not None and record.fingerprint == fp.digest:
            if record.quick != quick_key(found.path):
                records[found.name] = replace(record, quick=quick_key(found.path))
                save_pushed(self.directory, records)
            return record
        if (
            record is None
            and restored is not None
            and restored.name == found.name
            and (restored.fingerprint == fp.digest or restored.partial)
        ):
            # restored here from the registry: not ours to push again (a rank's share of it,
            # beside the other ranks' shares on a shared disk, is not a checkpoint to push)
            return restored
        return self._publish(found, layout, fp, records, restored)

    def _complete(self, found: Found, siblings: list[Found], relaxed: bool, now: float) -> bool:
        if not found.needs_settle or relaxed:
            return True
        if any(other.step > found.step for other in siblings):
            return True  # the writer has moved on to a newer checkpoint
        current = fingerprint(found.path).digest
        seen = self._seen.get(found.name)
        if seen is None or seen[0] != current:
            self._seen[found.name] = (current, now)
            seen = self._seen[found.name]
        due = seen[1] + self.config.settle
        if now >= due:
            return True
        self._settle_due = due if self._settle_due is None else min(self._settle_due, due)
        return False

    # -- publishing ---------------------------------------------------------------------

    def _publish(
        self,
        found: Found,
        layout: Layout,
        fp: Fingerprint,
        records: dict[str, Record],
        restored: Record | None,
    ) -> PushedCheckpoint | Record:
        repository = self.config.repository
        tag = f"step-{found.step}"
        ref = repository.with_tag(tag)
        known = records.get(found.name)
        existing = _existing(self.registries, ref)
        if existing is not None and (known is None or existing.digest != known.digest):
            if self._same_files(existing, found.path):
                record = self._remember(records, found, layout, fp, existing.digest, existing.lineage().run_id)
                self._emit("adopted", f"{found.name}: {ref} already holds these files; not pushed again")
                return record
            owner = existing.lineage().run_id
            if owner != self.config.run_id and not self.config.take_over:
                raise ExistsError(
                    f"{ref} holds another checkpoint (run {owner or 'unknown'}); not overwriting it with {found.name}",
                    hint="give each run its own checkpoint repository, or remove that tag",
                )
        parent = self._parent_for(found.step, records, restored)
        base = self.config.lineage or Lineage()
        metrics = {**base.metrics, **layout.metrics(found.path)}
        lineage = base.replace(
            run_id=self.config.run_id,
            step=found.step,
            metrics=metrics,
            parents=[*base.parents, *self._image_parent(), *([parent] if parent else [])],
        )
        self._recheck(found.path, fp)
        try:
            result = store.push(
                self.registries,
                source=found.path,
                ref=ref,
                kind="checkpoint",
                lineage=lineage,
                annotations={A_NAME: found.name, A_LAYOUT: layout.name},
                progress=self._progress,
                cache=self._cache,
                dedup=self.config.dedup,
            )
        except (InputError, OSError):
            self._recheck(found.path, fp)  # changed or vanished while it was sent: transient
            raise
        # The record keeps the fingerprint from before the push: a file added during the
        # push changes it, so the next scan pushes the checkpoint again, whole.
        self._remember(records, found, layout, fp, result.digest, self.config.run_id)
        self._last_digest = result.digest
        if self.config.attest is not None:
            self.config.attest(result.ref)
        pushed = PushedCheckpoint(found.name, found.step, result.digest, str(result.ref), parent, result.bytes_sent)
        self._emit("pushed", f"{found.name} → {result.ref}", pushed)
        return pushed

    def _recheck(self, path: Path, fp: Fingerprint) -> None:
        try:
            now = fingerprint(path)
        except FileNotFoundError:
            raise _Transient("it was removed") from None
        if now.digest != fp.digest:
            raise _Transient("its files changed")

    def _remember(
        self,
        records: dict[str, Record],
        found: Found,
        layout: Layout,
        fp: Fingerprint,
        digest: str,
        run_id: str | None,
    ) -> Record:
        repository = self.config.repository
        try:
            quick: tuple[int, int] | None = quick_key(found.path)
        except FileNotFoundError:
            quick = None
        record = Record(
            name=found.name,
            step=found.step,
            repository=repository.repo_url,
            digest=digest,
            ref=f"{repository.repo_url}:step-{found.step}",
            fingerprint=fp.digest,
            layout=layout.name,
            run_id=run_id,
            quick=quick,
            at=clock.iso(),
        )
        records[found.name] = record
        save_pushed(self.directory, records)
        return record

    def _same_files(self, existing: ParsedManifest, path: Path) -> bool:
        theirs = {view.path: view.digest for view in files_of(existing, existing.digest[:19])}
        try:
            files = scan_tree(path)
            if len(files) != len(theirs):
                return False
            return all(theirs.get(f.relpath) == self._cache.digest(f.path)[0] for f in files)
        except (InputError, OSError):
            return False

    def _parent_for(self, step: int, records: dict[str, Record], restored: Record | None) -> Parent | None:
        """The newest checkpoint of this directory's history before step."""
        repo_url = self.config.repository.repo_url
        earlier = [r for r in records.values() if r.repository == repo_url and r.step < step]
        if restored is not None and restored.step < step:
            earlier.append(restored)
        if not earlier:
            return None
        previous = max(earlier, key=lambda r: r.step)
        resumed = {d for d in (restored.digest if restored else None, _digest(self.resumed_from)) if d}
        relation: Relation = "resumed-from" if previous.digest in resumed else "parent"
        return Parent(digest=previous.digest, ref=previous.ref, relation=relation)

    def _resume_point(self, newest: Found | None, records: dict[str, Record], restored: Record | None) -> Parent | None:
        """What training resumes from: the newest complete checkpoint at start-up."""
        if newest is None:
            return None
        record = records.get(newest.name)
        if record is None or record.repository != self.config.repository.repo_url:
            record = restored if restored is not None and restored.name == newest.name else None
        if record is None:
            return None
        return Parent(digest=record.digest, ref=record.ref, relation="resumed-from")

    def _retain(self, keep: Retention) -> None:
        protect = [d for d in (self._last_digest,) if d]
        result = apply_retention(self.registries, repository=self.config.repository, keep=keep, protect=protect)
        for tag in result.removed:
            self._removed.append(tag)
            self._emit("removed", f"{self.config.repository.with_tag(tag)}")
        for kept in result.kept:
            if kept.artifact not in self._kept_said:
                self._kept_said.add(kept.artifact)
                self._emit("kept", f"{kept.artifact}: {kept.reason}")

    def _emit(self, kind: EventKind, message: str, checkpoint: PushedCheckpoint | None = None) -> None:
        if self._on_event is not None:
            self._on_event(WatchEvent(kind, message, checkpoint))


def _existing(registries: Registries, ref: Reference) -> ParsedManifest | None:
    try:
        return store.resolve(registries, ref=ref).parsed
    except NotFoundError:
        return None


def _digest(parent: Parent | None) -> str | None:
    return parent.digest if parent else None


def sidecar_lineage(manifest: Manifest | None, pod: PodEnvironment, image_digest: str | None) -> Lineage:
    """What every checkpoint of a run shares, as the sidecar knows it: the pipeline (the
    manifest's, else the pod's), the git commit and the image digest (--image-digest, else the pod's)."""
    pipeline = pod.pipeline or (manifest.pipeline.metadata.name if manifest is not None else None)
    try:
        return Lineage(
            pipeline=pipeline, git_commit=pod.git_commit or None, image_digest=image_digest or pod.image_digest or None
        )
    except InputError as err:
        raise UsageError(err.message, hint="an image digest is sha256:<64 hex>, a git commit 7 to 64 hex") from None


def sidecar_image(registries: Registries, pod: PodEnvironment) -> Reference | None:
    """The run's training image as the pod names it (host/repository@sha256:…), as a reference."""
    if not pod.image or "@" not in pod.image:
        return None
    return registries.ref(pod.image if "://" in pod.image else f"oci://{pod.image}")
