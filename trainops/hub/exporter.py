"""`trainops hub export`: a registry artifact → one commit on a Hub repository.

Steps: pull the artifact verified into a temporary directory (pulling.pull), write a model
card from its lineage unless it has a README.md, then with huggingface_hub: create the
repository if missing (private if asked), read the head commit of the target branch, and
upload every file in one `create_commit` with `parent_commit` set to that head. If anyone
committed to the branch in between, the Hub refuses the commit (HTTP 412) and the export
fails with exit 5: nothing on the Hub changes silently.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.errors import UsageError
from trainops.hub.card import collect_facts, has_card, render_card
from trainops.hub.hfapi import HubSettings, hub_errors
from trainops.registry import pulling, store
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.reference import Reference

CARD = "README.md"


@dataclass(frozen=True)
class Prepared:
    """An artifact pulled and verified, ready to upload: its files, card included."""

    source: str  # ref@digest
    digest: str
    directory: Path
    files: list[str]  # paths in the Hub repository, sorted
    card_written: bool


@dataclass(frozen=True)
class ExportResult:
    source: str
    digest: str
    repo_id: str
    revision: str
    files: list[str]
    card_written: bool
    parent_commit: str | None
    commit: str
    commit_url: str
    pr_url: str | None


@contextmanager
def prepare_export(
    registries: Registries,
    *,
    ref: Reference,
    repo_id: str,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
) -> Iterator[Prepared]:
    """Pull ref verified into a temporary directory and add the model card; removed after use."""
    with tempfile.TemporaryDirectory(prefix="trainops-export-") as tmp:
        found = store.resolve(registries, ref=ref)
        pulled = pulling.pull(registries, ref=found.ref, dest=Path(tmp) / "files", jobs=jobs, progress=progress)
        files = list(pulled.files)
        written = not has_card(files)
        if written:
            card = render_card(collect_facts(registries, found=found, repo_id=repo_id))
            (pulled.dest / CARD).write_text(card, encoding="utf-8")
            files.append(CARD)
        yield Prepared(str(pulled.ref), pulled.digest, pulled.dest, sorted(files), written)


def operations(prepared: Prepared) -> list[Any]:
    """One CommitOperationAdd per file, path in the repository = path in the artifact."""
    from huggingface_hub import CommitOperationAdd  # lazy: loads huggingface_hub

    return [
        CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(prepared.directory / rel)) for rel in prepared.files
    ]


def _head(api: Any, repo_id: str, revision: str) -> str | None:
    """The commit the branch points at now (None: a new repository with no commit)."""
    from huggingface_hub import errors as hf  # lazy: loads huggingface_hub

    try:
        sha = api.repo_info(repo_id, repo_type="model", revision=revision).sha
    except hf.RevisionNotFoundError:
        if revision == "main":
            return None
        api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
        sha = api.repo_info(repo_id, repo_type="model", revision=revision).sha
    return str(sha) if sha else None


def upload(
    prepared: Prepared, *, repo_id: str, revision: str, private: bool, create_pr: bool, settings: HubSettings
) -> ExportResult:
    """Create the repository if needed; one commit on top of the head read before it."""
    from huggingface_hub import HfApi  # lazy: loads huggingface_hub

    api = HfApi(endpoint=settings.endpoint, token=settings.token)
    with hub_errors(f"export to {repo_id}@{revision}", settings=settings):
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        parent = _head(api, repo_id, revision)
        info = api.create_commit(
            repo_id,
            operations(prepared),
            commit_message=f"trainops export of {prepared.source}",
            commit_description=f"Files of the artifact {prepared.digest}, verified on pull.",
            repo_type="model",
            revision=revision,
            create_pr=create_pr,
            parent_commit=parent,
        )
    return ExportResult(
        source=prepared.source,
        digest=prepared.digest,
        repo_id=repo_id,
        revision=revision,
        files=prepared.files,
        card_written=prepared.card_written,
        parent_commit=parent,
        commit=str(info.oid),
        commit_url=str(info.commit_url),
        pr_url=str(info.pr_url) if info.pr_url else None,
    )


def export_model(
    registries: Registries,
    *,
    ref: Reference,
    repo_id: str,
    revision: str | None = None,
    private: bool = False,
    create_pr: bool = False,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
) -> ExportResult:
    """Pull ref verified, write its card, and upload it to repo_id as one commit."""
    settings = HubSettings.from_env()
    if settings.offline:
        raise UsageError("cannot export with HF_HUB_OFFLINE set", hint="unset HF_HUB_OFFLINE to reach the Hub")
    with prepare_export(registries, ref=ref, repo_id=repo_id, jobs=jobs, progress=progress) as prepared:
        return upload(
            prepared,
            repo_id=repo_id,
            revision=revision or "main",
            private=private,
            create_pr=create_pr,
            settings=settings,
        )
