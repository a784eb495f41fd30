"""`trainops train render` and `trainops train submit`: the rendered tree on disk or in git.

Both render the same tree (the training job of the manifest's scheduler, plus the tenants'
queues). `render` writes it to a directory; `submit` commits it under spec.gitops.path in
the GitOps repository, with trailers naming the pipeline, image digest and run id, and
pushes, re-applying the tree on top when another writer pushed first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.errors import ExistsError, InputError
from trainops.pipeline.context import check_run_id, cluster_image, registries_for, resolve_image, train_spec
from trainops.registry.artifact import safe_relpath
from trainops.spec import Manifest

if TYPE_CHECKING:
    from trainops.render import Rendered

MARKER = ".trainops-rendered"


def _executable(path: str) -> bool:
    """Rendered scripts (the sbatch script) are executable, on disk and in git."""
    return path.endswith(".sh")


@dataclass(frozen=True)
class RenderTreeResult:
    directory: str
    files: list[str]
    image: str
    run_id: str

    def as_dict(self) -> dict[str, Any]:
        return {"directory": self.directory, "files": self.files, "image": self.image, "runId": self.run_id}


@dataclass(frozen=True)
class SubmitResult:
    repo: str
    branch: str
    path: str
    commit: str | None
    changed: bool
    attempts: int
    files: list[str]
    removed: list[str]
    image: str
    run_id: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "branch": self.branch,
            "path": self.path,
            "commit": self.commit,
            "changed": self.changed,
            "attempts": self.attempts,
            "files": self.files,
            "removed": self.removed,
            "image": self.image,
            "runId": self.run_id,
        }


def _render(manifest: Manifest, *, image: str | None, run_id: str, insecure: bool) -> tuple[Rendered, str, str | None]:
    from trainops.gitinfo import git_state
    from trainops.render import render_all

    train = train_spec(manifest)
    if train.scheduler == "local":
        raise InputError(
            "train.scheduler is local: there is nothing to render for a cluster",
            hint="run it with `trainops train run --local`, or pick another --env / scheduler",
        )
    check_run_id(run_id)
    registries = registries_for(manifest, insecure=insecure)
    try:
        pinned = cluster_image(resolve_image(manifest, registries, image=image))
    finally:
        registries.close()
    git = git_state(manifest.root)
    commit = git.commit if git else None
    return render_all(manifest, image=pinned, run_id=run_id, commit=commit), pinned, commit


def render_tree(
    manifest: Manifest, *, out: Path, run_id: str, image: str | None = None, insecure: bool = False
) -> RenderTreeResult:
    """Write the rendered tree to `out`, all or nothing.

    `out` must be new, empty, or a tree trainops rendered before (it holds the marker file);
    it is replaced as a whole, so files of an earlier render that this one lacks go away.
    """
    rendered, pinned, _ = _render(manifest, image=image, run_id=run_id, insecure=insecure)
    out = out.resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise ExistsError(f"{out} exists and was not rendered by trainops", hint="pick a new or empty directory for -o")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        names = []
        for item in rendered.files:
            rel = safe_relpath(item.path, "rendered file")
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(item.text, encoding="utf-8")
            if _executable(rel):
                target.chmod(0o755)
            names.append(rel)
        (staging / MARKER).write_text(f"run {run_id}\nimage {pinned}\n", encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
            staging.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return RenderTreeResult(directory=str(out), files=sorted(names), image=pinned, run_id=run_id)


def gitops_url(manifest: Manifest) -> tuple[str, bool]:
    """The GitOps repository as git reads it, and whether trainops may create it (a local path)."""
    url = manifest.pipeline.spec.gitops.repo
    if url.startswith("file://"):
        path = manifest.local_path(url[len("file://") :])
        return str(path.resolve()), True
    return url, False


def submit(
    manifest: Manifest,
    *,
    run_id: str,
    image: str | None = None,
    insecure: bool = False,
    max_attempts: int = 5,
    trailers: Mapping[str, str] | None = None,
) -> SubmitResult:
    """Commit the rendered tree to the GitOps repository and push it."""
    from trainops.gitops import write_tree

    rendered, pinned, git_commit = _render(manifest, image=image, run_id=run_id, insecure=insecure)
    gitops = manifest.pipeline.spec.gitops
    repo, create = gitops_url(manifest)
    name = manifest.pipeline.metadata.name
    digest = pinned.rsplit("@", 1)[1] if "@" in pinned else None
    written = {"Trainops-Pipeline": name, "Trainops-Run": run_id, "Trainops-Image": pinned}
    if digest:
        written["Trainops-Artifact"] = digest
    if git_commit:
        written["Trainops-Commit"] = git_commit
    written.update(trailers or {})
    train = train_spec(manifest)
    result = write_tree(
        repo=repo,
        branch=gitops.branch,
        path=gitops.path,
        files={item.path: item.text for item in rendered.files},
        executable=[item.path for item in rendered.files if _executable(item.path)],
        message=f"train {name}: run {run_id} on {train.scheduler}",
        trailers=written,
        create=create,
        max_attempts=max_attempts,
    )
    return SubmitResult(
        repo=result.repo,
        branch=result.branch,
        path=result.path,
        commit=result.commit,
        changed=result.changed,
        attempts=result.attempts,
        files=result.files,
        removed=result.removed,
        image=pinned,
        run_id=run_id,
    )


def render_text(manifest: Manifest, *, run_id: str, image: str | None = None, insecure: bool = False) -> str:
    """The rendered tree as one text for a terminal: each file under a `# file:` comment."""
    rendered, _, _ = _render(manifest, image=image, run_id=run_id, insecure=insecure)
    parts = []
    for item in rendered.files:
        text = item.text if item.text.endswith("\n") else item.text + "\n"
        parts.append(f"# file: {item.path}\n{text}")
    return "---\n".join(parts)
