"""Reading the manifests of many tags at once, at a cost linear in their number.

A checkpoint every 100 steps of a long run leaves thousands of tags in one repository:
listing them must read the tag index once (file://) and each manifest once, not the
index again for every tag; remote registries answer one request per manifest, several
in flight at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from trainops.errors import InputError, NotFoundError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, parse_manifest
from trainops.registry.backends import open_backend
from trainops.registry.backends.base import Backend
from trainops.registry.chunks.index import files_of
from trainops.registry.context import Registries
from trainops.registry.reference import Reference

REMOTE_JOBS = 8
_T = TypeVar("_T")


@dataclass(frozen=True)
class Tagged:
    """A tag of a repository and the manifest it points at."""

    tag: str
    parsed: ParsedManifest


def _by_digest(backend: Backend, repo: str, digest: str) -> ParsedManifest | None:
    try:
        return parse_manifest(backend.get_manifest(repo, digest))
    except NotFoundError:  # removed while listing
        return None


def _by_tag(backend: Backend, repo: str, tag: str) -> Tagged | None:
    try:
        return Tagged(tag, parse_manifest(backend.get_manifest(repo, tag)))
    except NotFoundError:  # moved or removed while listing
        return None


def tagged_manifests(registries: Registries, *, repository: Reference, tags: list[str]) -> list[Tagged]:
    """The manifests the tags point at, in the order of tags; tags removed meanwhile are
    left out. Where the tag listing carries digests, each distinct manifest is read once by
    digest; elsewhere each tag costs one request, REMOTE_JOBS of them in flight."""
    backend = registries.backend(repository)
    repo = repository.repository
    local = repository.scheme == "file"
    targets = backend.tag_targets(repo) if len(tags) > 1 else None
    if targets is not None:
        wanted = sorted({targets[t] for t in tags if t in targets})
        fetched = _each(wanted, lambda d: _by_digest(backend, repo, d), local=local)
        parsed = {d: p for d, p in zip(wanted, fetched, strict=True) if p is not None}
        return [Tagged(t, parsed[targets[t]]) for t in tags if targets.get(t) in parsed]
    found = _each(tags, lambda t: _by_tag(backend, repo, t), local=local)
    return [t for t in found if t is not None]


def _each(items: list[str], read: Callable[[str], _T], *, local: bool) -> list[_T]:
    """read of every item, in order: REMOTE_JOBS at a time unless the registry is local."""
    if local or len(items) < 2:
        return [read(item) for item in items]
    with ThreadPoolExecutor(max_workers=REMOTE_JOBS) as pool:
        return list(pool.map(read, items))


# -- `registry ls` ------------------------------------------------------------------------


@dataclass
class ListedTag:
    tag: str
    digest: str | None = None  # these four only in a detailed listing (they cost a manifest read)
    kind: str | None = None
    created: str | None = None
    size: int | None = None


@dataclass
class Listing:
    repository: str | None
    repositories: list[str] = field(default_factory=list)
    tags: list[ListedTag] = field(default_factory=list)
    pruned_records: int = 0  # `pruned-…` tags left out (records of deleted artifacts)
    untagged: list[str] = field(default_factory=list)  # repositories with no artifact tag (details only)
    bookkeeping: int = 0  # trainops' record repositories (`…/stages`, `…/incidents`) left out


def list_repository(registries: Registries, *, ref: Reference, records: bool = False, details: bool = True) -> Listing:
    """Tags of a repository; with details, what each points at (one manifest read per
    distinct manifest). The tags of pruned records are counted, and listed only with
    records=True. Without details only the (paginated) tag listing is read."""
    backend = registries.backend(ref)
    listing = Listing(repository=ref.repo_url)
    names: list[str] = []
    for name in backend.list_tags(ref.repository):
        if not records and name.startswith(media.PRUNED_TAG_PREFIX):
            listing.pruned_records += 1
        else:
            names.append(name)
    if not details:
        listing.tags = [ListedTag(name) for name in names]
        return listing
    for item in tagged_manifests(registries, repository=ref, tags=names):
        parsed = item.parsed
        size = sum(view.size for view in files_of(parsed, item.tag))  # a chunked one's files, not its packs
        listing.tags.append(ListedTag(item.tag, parsed.digest, parsed.kind, parsed.created, size))
    return listing


def list_registry(
    registries: Registries, *, url: str | None = None, details: bool = False, records: bool = True
) -> Listing:
    """Repositories under a registry URL (default: the manifest's registry); with details,
    which of them hold no artifact tag (an interrupted first push leaves one: blobs, no tag).
    Without records, trainops' bookkeeping repositories (a pipeline's stages and incidents)
    are counted, not listed."""

    root = registries.root(url)
    backend = open_backend(root, insecure=registries.insecure, insecure_registries=registries.insecure_registries)
    try:
        every = backend.list_repositories()
        repos = every if records else [r for r in every if not _bookkeeping(r)]
        untagged = [r for r in repos if not _has_artifact_tag(backend, r)] if details else []
    finally:
        backend.close()
    prefix = "file://" if root.scheme == "file" else f"{root.scheme}://{root.location}/"
    return Listing(
        repository=None,
        repositories=[prefix + r for r in repos],
        untagged=[prefix + r for r in untagged],
        bookkeeping=len(every) - len(repos),
    )


def _bookkeeping(repo: str) -> bool:
    """`<pipeline>/incidents`, `<pipeline>/stages`: where trainops keeps its records."""
    return "/" in repo and repo.rsplit("/", 1)[1] in media.BOOKKEEPING_REPOSITORIES


def _has_artifact_tag(backend: Backend, repo: str) -> bool:
    """Whether a tag of repo names an artifact (not a referrers index or a pruned record)."""
    try:
        tags = backend.list_tags(repo)
        return any(not t.startswith(("sha256-", media.PRUNED_TAG_PREFIX)) for t in tags)
    except NotFoundError:
        return False


def _names_a_registry(target: str) -> bool:
    """oci://HOST[:PORT][/] or s3://BUCKET[/]: a registry root, not a repository."""
    scheme, sep, rest = target.partition("://")
    return bool(sep) and scheme in ("oci", "s3") and "/" not in rest.strip("/")


def ls(registries: Registries, *, target: str | None, records: bool = False, details: bool = True) -> Listing:
    """The tags of a repository (with details: what each points at), or (for a registry
    URL or prefix) its repositories."""
    if target is None:
        return list_registry(registries, details=details, records=records)
    if _names_a_registry(target):  # oci://HOST[:PORT], s3://BUCKET: its repositories (catalog)
        return list_registry(registries, url=target, details=details, records=records)
    ref = registries.ref(target)
    if ref.tag or ref.digest:
        raise InputError(f"{target} names a tag or digest", hint="list a repository or a registry")
    try:
        return list_repository(registries, ref=ref, records=records, details=details)
    except NotFoundError:
        listing = list_registry(registries, url=ref.repo_url, details=details, records=records)
    if not listing.repositories:
        raise NotFoundError(f"nothing at {ref.repo_url}: no such repository, and no repositories under it")
    return listing
