"""`trainops hub import`: a Hub model snapshot → a ModelPack model artifact with lineage.

The snapshot comes from huggingface_hub's `snapshot_download` (HF_ENDPOINT, HF_TOKEN,
HF_HUB_OFFLINE and the HF cache honoured), or from a directory given with --from-dir: an
HF cache (or one repository's folder in it), a snapshot folder inside it, or a plain
local snapshot (`snapshot_download(local_dir=…)` or a copy). The files are pushed with the
Store's own push, so media types, dedup and the digest cache are those of `trainops push`;
a file-selection (--include/--exclude) is staged as symlinks, never copied.

Lineage: `gitRepo` is the Hub repository's URL and `gitCommit` the resolved revision
commit (a Hub repository is a git repository), also in the annotations below.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainops.clock import now_utc
from trainops.errors import InputError
from trainops.hub.hfapi import COMMIT, HubSettings, hub_errors
from trainops.modelfiles.safetensors import model_info
from trainops.registry import media, store
from trainops.registry.artifact import FileEntry, ModelConfig, scan_tree
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference
from trainops.serialize import FLATTEN
from trainops.signing.imported import attach_signature, check_signed_files, split_signature

A_HUB_REPO = "dev.trainops.hub.repo"  # the Hub repo id, org/name
A_HUB_REVISION = "dev.trainops.hub.revision"  # the resolved commit (40 hex)
A_HUB_REQUESTED = "dev.trainops.hub.requested"  # the revision asked for (branch, tag), if not a commit
_LOCAL_DIR_META = ".cache/huggingface/download"  # snapshot_download(local_dir=…) bookkeeping


@dataclass(frozen=True)
class Snapshot:
    """A model's files on this machine and the commit they are of (None if unknown)."""

    path: Path
    commit: str | None


@dataclass(frozen=True)
class ImportResult:
    repo_id: str
    revision: str | None  # as asked
    commit: str | None  # as resolved
    snapshot: Path
    push: store.PushResult = field(metadata=FLATTEN)  # in JSON: what `push` reports, beside the Hub's facts
    signature: str | None = None  # the referrer made of the model's own model.sig, if it had one


def repo_folder(repo_id: str) -> str:
    """The folder name of a model repository in the HF cache (models--org--name)."""
    return "models--" + repo_id.replace("/", "--")


_REF_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}$")


def cache_lookup(*, cache: Path, repo_id: str, revision: str | None) -> Snapshot | None:
    """The snapshot the HF cache holds for repo_id@revision, read from its layout alone
    (refs/<branch or tag> holds a commit; snapshots/<commit>/ its files), or None.

    This is the fast path of an import from the cache: it spares loading huggingface_hub
    (about 0.3-0.7 s here). Anything it does not find goes to snapshot_download, which
    then says why (not cached, unknown revision, offline)."""
    rev = revision or "main"
    folder = cache / repo_folder(repo_id)
    if COMMIT.match(rev):
        commit = rev
    elif _REF_NAME.match(rev) and ".." not in rev.split("/"):
        try:
            commit = (folder / "refs" / rev).read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            return None
    else:
        return None
    snapshot = folder / "snapshots" / commit
    return Snapshot(snapshot, commit) if COMMIT.match(commit) and snapshot.is_dir() else None


def download_snapshot(
    *, repo_id: str, revision: str | None, include: Sequence[str], exclude: Sequence[str], settings: HubSettings
) -> Snapshot:
    """snapshot_download into the HF cache (offline: only what the cache holds). A commit
    the cache already holds is read from it without asking the Hub: it cannot change."""
    if settings.cache and (settings.offline or (revision and COMMIT.match(revision))):
        found = cache_lookup(cache=Path(settings.cache), repo_id=repo_id, revision=revision)
        if found is not None:
            return found
    from huggingface_hub import snapshot_download  # lazy: loads huggingface_hub
    from huggingface_hub.utils.tqdm import disable_progress_bars  # lazy: loads tqdm

    disable_progress_bars()  # library code prints nothing; its own bars would go to stderr
    what = f"{repo_id}@{revision}" if revision else repo_id
    with hub_errors(what, settings=settings):
        path = snapshot_download(
            repo_id,
            revision=revision,
            allow_patterns=list(include) or None,
            ignore_patterns=list(exclude) or None,
            endpoint=settings.endpoint,
            token=settings.token,
            cache_dir=settings.cache,
            local_files_only=settings.offline,
        )
    folder = Path(path)
    return Snapshot(folder, folder.name if COMMIT.match(folder.name) else None)


def cached_snapshot(*, cache: Path, repo_id: str, revision: str | None, settings: HubSettings) -> Snapshot:
    """The snapshot of repo_id@revision in the HF cache at `cache`, offline."""
    found = cache_lookup(cache=cache, repo_id=repo_id, revision=revision)
    if found is not None:
        return found
    from huggingface_hub import snapshot_download  # lazy: loads huggingface_hub

    what = f"{repo_id}@{revision or 'main'} in {cache}"
    with hub_errors(what, settings=settings):
        path = snapshot_download(repo_id, revision=revision, cache_dir=str(cache), local_files_only=True)
    folder = Path(path)
    return Snapshot(folder, folder.name if COMMIT.match(folder.name) else None)


def local_snapshot(*, directory: Path, repo_id: str, revision: str | None, settings: HubSettings) -> Snapshot:
    """--from-dir DIR: an HF cache, a repository folder in one, a snapshot folder, or a plain copy."""
    if not directory.is_dir():
        raise InputError(f"--from-dir {directory} is not a directory", hint="pass a snapshot or an HF cache directory")
    folder = repo_folder(repo_id)
    if (directory / folder).is_dir():
        return cached_snapshot(cache=directory, repo_id=repo_id, revision=revision, settings=settings)
    if directory.name == folder:
        return cached_snapshot(cache=directory.parent, repo_id=repo_id, revision=revision, settings=settings)
    if directory.name.startswith("models--"):
        raise InputError(f"{directory} is the cache folder of another repository", hint=f"expected {folder}")
    commit = _snapshot_commit(directory, repo_id)
    if revision and COMMIT.match(revision) and commit and revision != commit:
        raise InputError(f"{directory} holds commit {commit}, not {revision}", hint="import the commit it holds")
    if commit is None and revision and COMMIT.match(revision):
        commit = revision
    return Snapshot(directory, commit)


def _snapshot_commit(directory: Path, repo_id: str) -> str | None:
    """The commit a snapshot folder is of: its name inside an HF cache, else the commit
    snapshot_download(local_dir=…) recorded beside every file (when they all agree)."""
    if directory.parent.name == "snapshots" and COMMIT.match(directory.name):
        owner = directory.parent.parent.name
        if owner.startswith("models--") and owner != repo_folder(repo_id):
            raise InputError(f"{directory} is a snapshot of another repository ({owner})")
        return directory.name
    meta = directory / _LOCAL_DIR_META
    commits: set[str] = set()
    if meta.is_dir():
        for record in meta.rglob("*.metadata"):
            with record.open("r", encoding="utf-8", errors="replace") as fh:
                first = fh.readline(64).strip()
            if COMMIT.match(first):
                commits.add(first)
    return commits.pop() if len(commits) == 1 else None


def select_files(snapshot: Path, *, include: Sequence[str], exclude: Sequence[str]) -> list[FileEntry]:
    """The snapshot's files that --include (any, default all) and --exclude (none) keep;
    huggingface_hub's own bookkeeping (.cache/) is never part of a model."""
    kept = [
        entry
        for entry in scan_tree(snapshot)
        if not entry.relpath.startswith(".cache/")
        and (not include or any(fnmatch.fnmatch(entry.relpath, p) for p in include))
        and not any(fnmatch.fnmatch(entry.relpath, p) for p in exclude)
    ]
    if not kept:
        raise InputError(f"no file of {snapshot} matches the --include/--exclude patterns", hint="nothing was pushed")
    return kept


def stage_links(files: Sequence[FileEntry], into: Path) -> None:
    """A tree of symlinks to the chosen files (push follows them; nothing is copied)."""
    for entry in files:
        link = into / entry.relpath
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(entry.path.resolve(), link)


def import_model(
    registries: Registries,
    *,
    repo_id: str,
    ref: Reference,
    revision: str | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    from_dir: Path | None = None,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
) -> ImportResult:
    """Get repo_id@revision (Hub, HF cache or from_dir) and push it to ref as a model."""
    settings = HubSettings.from_env()
    if from_dir is not None:
        snapshot = local_snapshot(directory=from_dir, repo_id=repo_id, revision=revision, settings=settings)
    else:
        snapshot = download_snapshot(
            repo_id=repo_id, revision=revision, include=include, exclude=exclude, settings=settings
        )
    files = select_files(snapshot.path, include=include, exclude=exclude)
    files, bundle = split_signature(files)
    if bundle is not None:  # checked before anything is pushed
        check_signed_files(bundle, files, where=f"{snapshot.path}/model.sig")
    annotations = {A_HUB_REPO: repo_id, media.A_SOURCE: settings.repo_url(repo_id)}
    if snapshot.commit:
        annotations[A_HUB_REVISION] = snapshot.commit
    if revision and revision != snapshot.commit:
        annotations[A_HUB_REQUESTED] = revision
    lineage = Lineage(git_repo=settings.repo_url(repo_id), git_commit=snapshot.commit)
    with tempfile.TemporaryDirectory(prefix="trainops-hub-") as tmp:
        stage_links(files, Path(tmp))
        info = model_info(Path(tmp))  # ModelPack config from the headers; a hostile one stops here
        pushed = store.push(
            registries,
            source=Path(tmp),
            ref=ref,
            kind="model",
            lineage=lineage,
            annotations=annotations,
            jobs=jobs,
            progress=progress,
            model=ModelConfig(config=info.as_config()),
        )
    signature = None
    if bundle is not None:
        signature = attach_signature(registries, ref=pushed.ref, bundle=bundle, created=now_utc())
    return ImportResult(repo_id, revision, snapshot.commit, snapshot.path, pushed, signature)
