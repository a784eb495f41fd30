"""Restore a checkpoint from the registry into a training directory, for training to resume.

The checkpoint is pulled (every file verified) into `.trainops/restore/` inside the
directory, then renamed into place under its original name, so the writer's own rule for
"complete" holds: a `step-*` directory never exists half-filled. Megatron's tracker and
DeepSpeed's `latest` are written after the rename, and `.trainops/restored.json` records
what was restored, so the watcher knows what training resumed from and does not push it
back. A directory that already holds a complete checkpoint at least as new is left alone:
after a pod restart, training continues from its own newer checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from trainops import clock
from trainops.checkpoint.catalog import CheckpointInfo, info_of, latest_checkpoint, require_repository
from trainops.checkpoint.layouts import LAYOUTS, Layout, detect_layout, get_layout
from trainops.checkpoint.layouts.base import fsync_dir
from trainops.checkpoint.layouts.dcp import METADATA
from trainops.checkpoint.shards import DCP_SHARD, Ranks, Selection, select
from trainops.checkpoint.state import STATE_DIR, Record, fingerprint, load_restored, locked, save_restored
from trainops.errors import InputError
from trainops.registry import pulling, store
from trainops.registry.chunks.index import files_of
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.digestcache import DigestCache
from trainops.registry.listing import Tagged
from trainops.registry.reference import Reference

RESTORE_DIR = "restore"
DIGESTS = "digests.sqlite"  # the digests of the files restored here: a restart on this node stats, not reads


@dataclass(frozen=True)
class RestoreResult:
    restored: CheckpointInfo | None  # what was pulled (None: nothing was)
    path: Path | None  # the checkpoint training will resume from, if any
    reason: str
    selection: Selection | None = None  # restore --rank: the rank's files
    bytes_received: int = 0
    bytes_reused: int = 0  # taken from a node-local copy with the same digests


def restore_latest(
    registries: Registries,
    *,
    repository: Reference,
    directory: Path,
    layout: str = "auto",
    progress: ProgressSink | None = None,
    ranks: Ranks | None = None,
) -> RestoreResult:
    """Pull the newest checkpoint of repository (by step) into directory, unless directory
    already holds one at least as new. An empty or missing repository is not an error."""
    require_repository(repository)
    info = latest_checkpoint(registries, repository=repository)
    if info is None:
        return RestoreResult(None, None, f"no checkpoint in {repository.repo_url}")
    ref = repository.with_tag(info.tag).with_digest(info.digest)
    return restore_ref(registries, ref=ref, directory=directory, layout=layout, progress=progress, ranks=ranks)


def restore_ref(
    registries: Registries,
    *,
    ref: Reference,
    directory: Path,
    layout: str = "auto",
    progress: ProgressSink | None = None,
    ranks: Ranks | None = None,
) -> RestoreResult:
    """Pull the checkpoint ref into directory/<its original name> (restore semantics above).

    ranks: only the files that rank reads, into the checkpoint's directory beside whatever
    other ranks put there (a shared disk); a file already there (a node-local copy)
    with the artifact's digest is reused, not downloaded."""
    directory = directory.absolute()
    found = store.resolve(registries, ref=ref)
    repository = ref.with_tag(None).with_digest(None)
    info = info_of(repository, Tagged(found.ref.tag or "", found.parsed))
    if info.step is None:
        raise InputError(f"{ref} records no training step", hint="restore a checkpoint that `ckpt watch` pushed")
    step = info.step
    directory.mkdir(parents=True, exist_ok=True)
    with locked(directory):
        chosen = _choose_layout(layout, directory, info, ref)
        local = [f for f in chosen.listing(directory).found if f.committed]
        newest = max(local, key=lambda f: f.step) if local else None
        marker = load_restored(directory)
        share = marker is not None and marker.partial and newest is not None and marker.name == newest.name
        if newest is not None and (newest.step > step or (newest.step == step and ranks is None and not share)):
            return RestoreResult(
                None,
                newest.path,
                f"{newest.path} (step {newest.step}) is at least as new as {ref.with_digest(None)} "
                f"(step {step}); nothing pulled",
            )
        name = info.name if info.name and _safe_name(info.name) and chosen.step_of(info.name) == step else None
        name = name or chosen.default_name(step)
        dest = directory / name
        if (
            ranks is None
            and marker is not None
            and not marker.partial
            and (marker.name, marker.digest) == (name, found.manifest.digest)
            and dest.is_dir()
            and fingerprint(dest).digest == marker.fingerprint
        ):  # pulled and moved into place, then interrupted before the tracker was written
            chosen.after_restore(directory, name, step)
            return RestoreResult(info, dest, f"restored {name} (step {step}) from {ref.with_digest(None)}")
        staging = directory / STATE_DIR / RESTORE_DIR / found.manifest.digest[7:23]
        _drop_other_staging(staging)
        selection = _selection(registries, found, ranks, staging) if ranks is not None else None
        cache = DigestCache(directory / STATE_DIR / DIGESTS)  # kept with the node's copy, not the pod's home
        pulled = _pull(registries, found, staging, dest, selection, cache, progress)
        record = Record(
            name=name,
            step=step,
            repository=repository.repo_url,
            digest=found.manifest.digest,
            ref=f"{repository.repo_url}:{info.tag}" if info.tag else repository.repo_url,
            fingerprint=fingerprint(staging).digest,
            layout=chosen.name,
            run_id=info.run_id,
            at=clock.iso(),
            partial=selection is not None and selection.sharding != "none",
        )
        save_restored(directory, record)  # before the rename: the directory never appears unrecorded
        _into_place(staging, dest, pulled, cache, shared=selection is not None)
        chosen.after_restore(directory, name, step)
    what = f" ({len(selection.files)} file(s) for {_ranks_text(ranks)})" if selection is not None and ranks else ""
    return RestoreResult(
        info,
        dest,
        f"restored {name} (step {step}){what} from {ref.with_digest(None)}",
        selection,
        pulled.bytes_received,
        pulled.bytes_reused,
    )


def _selection(registries: Registries, found: store.Resolved, ranks: Ranks, staging: Path) -> Selection:
    """The files ranks.rank restores; a DCP checkpoint's `.metadata` is read first (small)."""

    paths = [view.path for view in files_of(found.parsed, str(found.ref))]
    plans = [p for p in paths if p.rsplit("/", 1)[-1] == METADATA]
    metadata = None
    if len(plans) == 1 and any(DCP_SHARD.match(p) for p in paths):
        where = staging.parent / f"{staging.name}-metadata"
        pulling.pull(registries, ref=found.ref, dest=where, paths=plans)
        metadata = (where / plans[0]).read_bytes()
        shutil.rmtree(where, ignore_errors=True)
    return select(paths, ranks, metadata)


def _pull(
    registries: Registries,
    found: store.Resolved,
    staging: Path,
    dest: Path,
    selection: Selection | None,
    cache: DigestCache,
    progress: ProgressSink | None,
) -> pulling.PullResult:
    """The checkpoint's files (a rank's share: selection) into staging, verified; a file dest
    (the node's copy) already holds with the same digest is reused, not downloaded."""
    reuse = [dest] if dest.is_dir() and not dest.is_symlink() else []
    paths = selection.files if selection is not None else None
    return pulling.pull(
        registries, ref=found.ref, dest=staging, progress=progress, paths=paths, reuse=reuse, cache=cache
    )


def _into_place(staging: Path, dest: Path, pulled: pulling.PullResult, cache: DigestCache, *, shared: bool) -> None:
    """The verified files to dest: renamed whole, or (a rank's share, on a disk other ranks
    may share) merged in; their digests remembered, for the next restore on this node."""
    if shared and dest.is_dir() and not dest.is_symlink():
        _merge_into(staging, dest, pulled.files)  # other ranks' files stay
    else:
        _move_into_place(staging, dest)
    pulling.remember(dest, pulled.digests, cache)


def _ranks_text(ranks: Ranks) -> str:
    first, last = ranks.ranks[0], ranks.ranks[-1]
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def _merge_into(staging: Path, dest: Path, files: list[str]) -> None:
    """Move a rank's verified files into the checkpoint directory other ranks share."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / rel, target)
    shutil.rmtree(staging, ignore_errors=True)
    fsync_dir(dest)
    with contextlib.suppress(OSError):
        staging.parent.rmdir()


def _choose_layout(layout: str, directory: Path, info: CheckpointInfo, ref: Reference) -> Layout:
    if layout != "auto":
        return get_layout(layout)
    local = detect_layout(directory)
    pushed = LAYOUTS.get(info.layout or "")
    if local is not None and pushed is not None and local.name != pushed.name:
        raise InputError(
            f"{ref} is a {pushed.name} checkpoint but {directory} holds {local.name} ones",
            hint="restore into the directory of a run with the same layout, or pass --layout",
        )
    chosen = local or pushed
    if chosen is None and info.name:
        chosen = next((lay for lay in LAYOUTS.values() if lay.step_of(info.name) == info.step), None)
    if chosen is None:
        raise InputError(f"cannot tell the checkpoint layout of {ref}", hint="pass --layout")
    return chosen


def _safe_name(name: str) -> bool:
    """A single, visible path component: a name from an artifact must not point elsewhere."""
    return bool(name) and "/" not in name and "\\" not in name and "\x00" not in name and not name.startswith(".")


def _drop_other_staging(staging: Path) -> None:
    """An interrupted restore of another checkpoint left verified blobs behind: they are of
    no use now (a newer checkpoint is being restored) and may be large."""
    if not staging.parent.is_dir():
        return
    for entry in staging.parent.iterdir():
        if staging.name in entry.name:  # this checkpoint's (and the store's staging of it)
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _move_into_place(staging: Path, dest: Path) -> None:
    """Rename the verified checkpoint to its final name; an incomplete leftover of the same
    name (a killed writer's) is moved aside first and deleted."""
    aside = None
    if dest.exists() or dest.is_symlink():
        aside = staging.parent / f"replaced-{dest.name}-{os.getpid()}"
        os.rename(dest, aside)
    os.rename(staging, dest)
    fsync_dir(dest.parent)
    if aside is not None:
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            aside.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        staging.parent.rmdir()  # only if nothing else is staged there
