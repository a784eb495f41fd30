"""`trainops ci`: what a push changed, which stages that affects, and the run of those.

The pushed range comes from `--since REV` (to HEAD), else GitHub Actions (GITHUB_EVENT_BEFORE,
or `before` of the push event at GITHUB_EVENT_PATH, to GITHUB_SHA), else GitLab CI
(CI_COMMIT_BEFORE_SHA to CI_COMMIT_SHA). A before of all zeros (a new branch) runs every
stage. The changed paths are classified:

- a file the code comes from (the image context's selection) → image onwards;
- trainops.yaml → from the first stage whose section (or overlay) changed; only `rollout:`
  → rollout; registry, gitops, metadata, tenants or patches → every stage;
- anything else (docs) → nothing runs, and the result says so.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trainops.errors import InputError, UsageError
from trainops.pipeline.graph import STAGES, build_graph
from trainops.pipeline.run import RunOptions, RunResult, run_pipeline
from trainops.pipeline.stage import EventSink, no_events
from trainops.serialize import HIDDEN
from trainops.spec import Manifest

ZERO = "0" * 40
SECTION_STAGE = {"image": "image", "train": "train", "eval": "eval", "release": "release", "rollout": "rollout"}


@dataclass(frozen=True)
class PushRange:
    before: str | None  # None: a new branch (every stage runs)
    after: str
    origin: str  # --since, GitHub Actions, GitLab CI


@dataclass
class Decision:
    start: str | None  # the first stage to run; None: nothing
    reason: str
    paths: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)


def _git(root: Path, *args: str) -> str | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, env=env, check=False)
    except OSError:
        return None
    return out.stdout if out.returncode == 0 else None


def _commit(root: Path, rev: str, what: str) -> str:
    found = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if not found:
        raise InputError(
            f"CI range: git does not know {what} {rev!r} in {root}",
            hint="fetch the whole history (actions/checkout fetch-depth: 0, GIT_DEPTH: 0) or pass --since REV",
        )
    return found.strip()


def push_range(*, root: Path, since: str | None, environ: Mapping[str, str]) -> PushRange:
    """The pushed range, checked against the repository, before anything runs."""
    if since:
        return PushRange(_commit(root, since, "--since"), _commit(root, "HEAD", "HEAD"), "--since")
    before, after, origin = None, None, None
    if environ.get("GITHUB_ACTIONS") or environ.get("GITHUB_SHA"):
        before, after, origin = environ.get("GITHUB_EVENT_BEFORE"), environ.get("GITHUB_SHA"), "GitHub Actions"
        if not before and environ.get("GITHUB_EVENT_PATH"):
            before = _event_before(Path(environ["GITHUB_EVENT_PATH"]))
    elif environ.get("GITLAB_CI") or environ.get("CI_COMMIT_SHA"):
        before, after, origin = environ.get("CI_COMMIT_BEFORE_SHA"), environ.get("CI_COMMIT_SHA"), "GitLab CI"
    if origin is None:
        raise UsageError("no pushed range: pass --since REV, or run under GitHub Actions or GitLab CI")
    head = _commit(root, after or "HEAD", "the pushed commit")
    if not before or before == ZERO:
        return PushRange(None, head, origin)
    return PushRange(_commit(root, before, "the commit before the push"), head, origin)


def _event_before(path: Path) -> str | None:
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InputError(f"GITHUB_EVENT_PATH {path} is not a readable JSON event") from None
    before = event.get("before") if isinstance(event, dict) else None
    return str(before) if before else None


def changed_paths(*, root: Path, span: PushRange) -> list[str]:
    """Paths (relative to the repository's top) that the range changed."""
    if span.before is None:
        return []
    out = _git(root, "diff", "--name-only", "--no-renames", span.before, span.after)
    if out is None:
        raise InputError(f"CI range: git cannot diff {span.before[:12]}..{span.after[:12]}")
    return sorted(line for line in out.splitlines() if line)


def _top(root: Path) -> Path:
    top = _git(root, "rev-parse", "--show-toplevel")
    if not top:
        raise InputError(f"{root} is not in a git repository", hint="trainops ci reads the pushed range from git")
    return Path(top.strip())


def _overlay_sections(doc: Any, env: str | None) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {}
    spec = doc.get("spec")
    out = {f"spec.{k}": v for k, v in spec.items()} if isinstance(spec, dict) else {}
    out["metadata"] = doc.get("metadata")
    envs = doc.get("environments")
    overlay = envs.get(env) if env and isinstance(envs, dict) else None
    if isinstance(overlay, dict):
        out.update((f"environments.{env}.{key}", value) for key, value in overlay.items())
    return out


def manifest_sections(*, manifest: Manifest, before: str, rel: str) -> list[str]:
    """The sections of trainops.yaml (spec.X, metadata, environments.ENV.X) that differ from `before`."""
    import yaml

    old_text = _git(manifest.root, "show", f"{before}:{rel}")
    try:
        old = yaml.safe_load(old_text) if old_text else None
        new = yaml.safe_load(manifest.path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return ["spec"]
    a, b = _overlay_sections(old, manifest.env), _overlay_sections(new, manifest.env)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def _stage_of(section: str) -> str:
    name = section.rsplit(".", 1)[-1]
    return SECTION_STAGE.get(name, STAGES[0])


def classify(*, manifest: Manifest, span: PushRange) -> Decision:
    """Which stages the pushed change affects (see the module docstring)."""
    from trainops.pipeline.keys import source_digest

    defined = [n.name for n in build_graph(manifest=manifest)]
    if span.before is None:
        return Decision(defined[0] if defined else None, f"{span.after[:12]} starts a branch: every stage")
    top = _top(manifest.root)
    paths = changed_paths(root=manifest.root, span=span)
    source = source_digest(manifest=manifest)
    src_root = Path(source.root).resolve().relative_to(top.resolve())
    code_files = {(src_root / f).as_posix() for f in source.files}
    code = [p for p in paths if p in code_files or (_gone(top, p) and _under(p, src_root) and not _doc(p))]
    rel = manifest.path.resolve().relative_to(top.resolve()).as_posix()
    sections = manifest_sections(manifest=manifest, before=span.before, rel=rel) if rel in paths else []
    starts = ["image"] if code else []
    starts += [_stage_of(s) for s in sections]
    if not starts:
        what = f"{len(paths)} changed path(s) feed no stage" if paths else "nothing changed"
        return Decision(None, f"{what} (docs or files outside the code and trainops.yaml): nothing runs", paths)
    first = min(STAGES.index(s) for s in starts)
    start = next((d for d in defined if STAGES.index(d) >= first), None)
    why = []
    if code:
        why.append(f"training code changed ({', '.join(code[:3])}{' …' if len(code) > 3 else ''}) → image onwards")
    if sections:
        why.append(f"trainops.yaml changed ({', '.join(sections)}) → {STAGES[first]} onwards")
    return Decision(start, "; ".join(why), paths, code, sections)


def _gone(top: Path, path: str) -> bool:
    return not (top / path).exists()


def _under(path: str, root: Path) -> bool:
    return root.as_posix() in ("", ".") or path.startswith(root.as_posix() + "/")


def _doc(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith((".md", ".rst", ".txt")) or name.startswith(("readme", "license", "changelog"))


@dataclass
class CiResult:
    pipeline: str
    span: PushRange = field(metadata=HIDDEN)  # in JSON as `range`
    decision: Decision
    run: RunResult | None = None  # when stages ran
    data_properties: ClassVar[tuple[str, ...]] = ("range", "exit_code")

    @property
    def range(self) -> PushRange:
        return self.span

    @property
    def exit_code(self) -> int:
        return self.run.error.exit_code if self.run is not None and self.run.error else 0


def run_ci(
    *,
    manifest: Manifest,
    since: str | None,
    environ: Mapping[str, str],
    options: RunOptions,
    on_event: EventSink = no_events,
) -> CiResult:
    """Read the pushed range, classify it, and run the affected stages from the first one."""
    from dataclasses import replace

    span = push_range(root=manifest.root, since=since, environ=environ)
    decision = classify(manifest=manifest, span=span)
    result = CiResult(pipeline=manifest.pipeline.metadata.name, span=span, decision=decision)
    if decision.start is None:
        return result
    result.run = run_pipeline(manifest=manifest, options=replace(options, start=decision.start), on_event=on_event)
    return result
