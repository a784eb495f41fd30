"""`trainops init`: a new project's trainops.yaml, .gitignore, CI workflow and a runnable
minimal trainer (so `trainops train run --local --env dev` works at once), from templates."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from trainops import __version__
from trainops.errors import ExistsError, InputError
from trainops.templating import render_template

MANIFEST = Path("trainops.yaml")
GITIGNORE = Path(".gitignore")
WORKFLOW = Path(".github/workflows/trainops.yml")
GITLAB_CI = Path(".gitlab-ci.yml")
CI_SYSTEMS = {"github": (WORKFLOW, "project/workflow.yml.j2"), "gitlab": (GITLAB_CI, "project/gitlab-ci.yml.j2")}


@dataclass
class InitResult:
    directory: Path
    written: list[Path] = field(default_factory=list)
    updated: list[Path] = field(default_factory=list)


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
    files = {MANIFEST: render_template("project/trainops.yaml.j2", name=name, module=module, version=__version__)}
    if ci in CI_SYSTEMS:
        path, template = CI_SYSTEMS[ci]
        files[path] = render_template(template, version=__version__)
    trainer = _trainer_files(directory, name, module)
    existing = [rel for rel in files if (directory / rel).exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        raise ExistsError(f"refusing to overwrite {names} in {directory}", hint="pass --force to replace them")
    result = InitResult(directory=directory)
    for rel, text in {**files, **trainer}.items():
        _write_atomic(directory / rel, text)
        result.written.append(rel)
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
    return result
