"""`trainops init`: a new project's trainops.yaml, .gitignore, .dockerignore, CI workflow and
a runnable minimal trainer and eval (so init → `train run --local --env dev` → `eval run` →
`release create` → `rollout start` works at once), from templates; outside a git repository,
a new one with the scaffold as its first commit (lineage records the commit)."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from trainops import DOCS_URL, __version__
from trainops.errors import CommandFailedError, ExistsError, InputError
from trainops.gitinfo import git_available, git_user, run_git
from trainops.templating import render_template

MANIFEST = Path("trainops.yaml")
GITIGNORE = Path(".gitignore")
DOCKERIGNORE = Path(".dockerignore")
# The first commit's author when git has no identity configured (said in the result).
INIT_AUTHOR = ("trainops init", "trainops-init@localhost")
WORKFLOW = Path(".github/workflows/trainops.yml")
GITLAB_CI = Path(".gitlab-ci.yml")
CI_SYSTEMS = {"github": (WORKFLOW, "project/workflow.yml.j2"), "gitlab": (GITLAB_CI, "project/gitlab-ci.yml.j2")}


@dataclass
class InitResult:
    directory: Path
    written: list[Path] = field(default_factory=list)
    updated: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)  # files of the user's that init leaves as they are
    git_commit: str | None = None  # the first commit of the repository init made
    git_author: str | None = None  # its author when git had none configured
    ci_note: str | None = None  # where the CI workflow went, when not in directory, and why


def project_name(directory: Path) -> str:
    """A DNS-1123 label made from a directory name (`My_Model` → `my-model`)."""
    label = re.sub(r"[^a-z0-9-]+", "-", directory.resolve().name.lower()).strip("-")[:63].strip("-")
    return label or "my-model"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # as an editor would create it (mkstemp makes it private)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _trainer_files(directory: Path, name: str, module: str) -> dict[Path, str]:
    """A runnable minimal trainer and eval in <module>/, unless that package exists (the
    user's own code is never touched)."""
    package = Path(module)
    if (directory / package).exists():
        return {}
    return {
        package / "__init__.py": "",
        package / "train.py": render_template("project/train.py.j2", name=name, module=module),
        package / "eval.py": render_template("project/eval.py.j2", name=name, module=module),
    }


def init_project(*, directory: Path, name: str | None = None, force: bool = False, ci: str = "github") -> InitResult:
    """Scaffold a project. Refuses to overwrite (all or nothing) unless force.

    `ci` picks the CI system whose workflow runs `trainops ci` on every push: github
    (.github/workflows/trainops.yml), gitlab (.gitlab-ci.yml) or none.

    The .gitignore is never overwritten: the lines trainops needs are added to it.
    """
    name = name or project_name(directory)
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
        raise InputError(
            f"{name!r} is not a valid pipeline name",
            hint="use lowercase letters, digits and '-' (a DNS-1123 label), e.g. --name my-model",
        )
    if directory.exists() and not directory.is_dir():
        raise InputError(f"{directory} exists and is not a directory")
    if ci != "none" and ci not in CI_SYSTEMS:
        raise InputError(f"unknown CI system {ci!r}", hint=f"use {', '.join(CI_SYSTEMS)} or none")
    module = name.replace("-", "_")
    files = {
        MANIFEST: render_template(
            "project/trainops.yaml.j2", name=name, module=module, version=__version__, docs_url=DOCS_URL
        )
    }
    top = _repository_top(directory)
    new_repository = top is None
    inner = _inside(directory, Path(top)) if top is not None else None
    ci_note = None
    if ci in CI_SYSTEMS:
        path, template = CI_SYSTEMS[ci]
        if inner and top is not None:  # CI reads its file only at the repository's root
            path = Path(top) / (path.with_name(f"trainops-{name}.yml") if ci == "github" else path)
            ci_note = (
                f"the CI workflow is {path}: {ci} reads it only at the repository's root; its steps run in {inner}"
            )
        files[path] = render_template(template, version=__version__, working_directory=inner)
    trainer = _trainer_files(directory, name, module)
    existing = [rel for rel in files if (directory / rel).exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        raise ExistsError(f"refusing to overwrite {names} in {directory}", hint="pass --force to replace them")
    if new_repository and not git_available():
        raise CommandFailedError(
            f"{directory} is not in a git repository and git is not installed to make one",
            hint="install git (apt-get install git), then run trainops init again",
        )
    result = InitResult(directory=directory, ci_note=ci_note)
    for rel, text in {**files, **trainer}.items():
        _write_atomic(directory / rel, text)
        result.written.append(rel)
    if (directory / DOCKERIGNORE).exists():
        result.kept.append(DOCKERIGNORE)
    else:
        _write_atomic(directory / DOCKERIGNORE, render_template("project/dockerignore.j2"))
        result.written.append(DOCKERIGNORE)
    _gitignore(directory, result)
    if new_repository:
        _first_commit(directory, result)
    return result


def _inside(directory: Path, top: Path) -> str | None:
    """directory relative to the repository's top (`models/llm`); None at the top itself."""
    probe = directory.resolve()
    try:
        inner = probe.relative_to(top.resolve())
    except ValueError:
        return None
    return inner.as_posix() if inner.parts else None


def _repository_top(directory: Path) -> str | None:
    """The top of the git repository holding directory (or its nearest existing parent)."""

    probe = directory
    while not probe.exists():
        probe = probe.parent
    top = run_git(probe, "rev-parse", "--show-toplevel")
    return top.strip() if top else None


def _first_commit(directory: Path, result: InitResult) -> None:
    """git init, and the scaffold as the first commit (as `cargo new` and `hatch new` do)."""

    if run_git(directory, "init", "--quiet") is None:
        raise CommandFailedError(
            f"git init failed in {directory}", hint="install git, or run `git init` there yourself first"
        )
    env: dict[str, str] = {}
    if git_user(directory) is None:
        name, email = INIT_AUTHOR
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name}
        env["GIT_COMMITTER_EMAIL"] = email
        result.git_author = f"{name} <{email}>"
    paths = [str(p) for p in [*result.written, *result.updated]]
    added = run_git(directory, "add", "--", *paths)
    message = "trainops init: the pipeline's manifest, trainer, eval and CI workflow"
    committed = added is not None and run_git(directory, "commit", "--quiet", "-m", message, env=env) is not None
    head = run_git(directory, "rev-parse", "HEAD") if committed else None
    if not head:
        raise CommandFailedError(
            f"git could not make the first commit in {directory}",
            hint="commit the scaffolded files yourself (git add -A && git commit)",
        )
    result.git_commit = head.strip()


def _gitignore(directory: Path, result: InitResult) -> None:
    """The lines trainops needs, added to a .gitignore (never overwritten)."""
    ignore = directory / GITIGNORE
    wanted = render_template("project/gitignore.j2")
    if ignore.exists():
        current = ignore.read_text(encoding="utf-8")
        have = {line.strip() for line in current.splitlines()}
        missing = [
            line for line in wanted.splitlines() if line.strip() and not line.startswith("#") and line not in have
        ]
        if missing:
            sep = "" if current.endswith("\n") or not current else "\n"
            _write_atomic(ignore, current + sep + "\n".join(["# trainops", *missing]) + "\n")
            result.updated.append(GITIGNORE)
    else:
        _write_atomic(ignore, wanted)
        result.written.append(GITIGNORE)
