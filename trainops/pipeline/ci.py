"""`trainops ci`: what a push changed, which stages that affects, and the run of those.

The pushed range comes from `--since REV` (to `--until REV`, default HEAD), else GitHub
Actions (GITHUB_EVENT_BEFORE, or `before` of the push event at GITHUB_EVENT_PATH, to
GITHUB_SHA), else GitLab CI (CI_COMMIT_BEFORE_SHA to CI_COMMIT_SHA). These are the values a
git hook receives (`oldrev newrev refname`): an old value of all zeros (a new branch) runs
every stage; a new value of all zeros (a deleted branch) runs nothing and says so. The
changed paths are classified:

- a file the code comes from (the image context's selection) → image onwards;
- trainops.yaml → from the first stage whose section (or overlay) changed; only `rollout:`
  → rollout; registry, gitops, metadata, tenants or patches → every stage;
- anything else (docs) → nothing runs, and the result says so.

A stage before the first affected one whose output for its inputs is not in the registry
(an earlier CI run failed, say) runs too, as `dvc repro` runs what is out of date.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from trainops.errors import InputError, UsageError
from trainops.gitinfo import run_git
from trainops.manifest import Manifest
from trainops.manifest.yamlsafe import MAX_BYTES, YamlProblem, load_yaml_mapping
from trainops.pipeline.graph import STAGES, build_graph
from trainops.pipeline.keys import source_digest
from trainops.pipeline.run import RunOptions, RunResult, run_pipeline
from trainops.pipeline.stage import EventSink, no_events
from trainops.serialize import HIDDEN

ZERO = "0" * 40
_ZEROS = re.compile(r"0{40}|0{64}")  # git's null object id (SHA-1, SHA-256)
SECTION_STAGE = {"image": "image", "train": "train", "eval": "eval", "release": "release", "rollout": "rollout"}


@dataclass(frozen=True)
class PushRange:
    before: str | None  # None: a new branch (every stage runs)
    after: str | None  # None: the branch was deleted (nothing runs)
    origin: str  # --since, GitHub Actions, GitLab CI


def is_null(rev: str | None) -> bool:
    """Whether rev is git's all-zero object id (a new or a deleted ref in a hook's input)."""
    return bool(rev) and _ZEROS.fullmatch(rev or "") is not None


@dataclass
class Decision:
    start: str | None  # the first stage to run; None: nothing
    reason: str
    paths: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)


def _commit(root: Path, rev: str, what: str) -> str:
    if rev.startswith("-"):
        raise InputError(f"CI range: {what} {rev!r} is not a revision", hint="pass a commit, branch or tag")
    found = run_git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if not found:
        raise InputError(
            f"CI range: git does not know {what} {rev!r} in {root}",
            hint="fetch the whole history (actions/checkout fetch-depth: 0, GIT_DEPTH: 0) or pass --since REV",
        )
    return found.strip()


def push_range(*, root: Path, since: str | None, until: str | None = None, environ: Mapping[str, str]) -> PushRange:
    """The pushed range, checked against the repository, before anything runs."""
    if since or until:
        return _span(root, since, until or "HEAD", "--since")
    before, after, origin = None, None, None
    if environ.get("GITHUB_ACTIONS") or environ.get("GITHUB_SHA"):
        before, after, origin = environ.get("GITHUB_EVENT_BEFORE"), environ.get("GITHUB_SHA"), "GitHub Actions"
        if environ.get("GITHUB_EVENT_PATH"):
            event_before, event_after = _event_range(Path(environ["GITHUB_EVENT_PATH"]))
            before = before or event_before
            after = event_after if is_null(event_after) else after
    elif environ.get("GITLAB_CI") or environ.get("CI_COMMIT_SHA"):
        before, after, origin = environ.get("CI_COMMIT_BEFORE_SHA"), environ.get("CI_COMMIT_SHA"), "GitLab CI"
    if origin is None:
        raise UsageError("no pushed range: pass --since REV, or run under GitHub Actions or GitLab CI")
    return _span(root, before, after or "HEAD", origin)


def _span(root: Path, before: str | None, after: str, origin: str) -> PushRange:
    if is_null(after):
        return PushRange(before, None, origin)  # a deleted branch: nothing to check out or run
    head = _commit(root, after, "the pushed commit" if origin != "--since" else "--until")
    if not before or is_null(before):
        return PushRange(None, head, origin)
    return PushRange(
        _commit(root, before, "the commit before the push" if origin != "--since" else "--since"), head, origin
    )


def _event_range(path: Path) -> tuple[str | None, str | None]:
    """`before` and `after` of a GitHub push event."""
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InputError(f"GITHUB_EVENT_PATH {path} is not a readable JSON event") from None
    if not isinstance(event, dict):
        return None, None
    before, after = event.get("before"), event.get("after")
    return (str(before) if before else None), (str(after) if after else None)


def changed_paths(*, root: Path, span: PushRange) -> list[str]:
    """Paths (relative to the repository's top) that the range changed."""
    if span.before is None or span.after is None:
        return []
    out = run_git(root, "diff", "--name-only", "--no-renames", span.before, span.after)
    if out is None:
        raise InputError(f"CI range: git cannot diff {span.before[:12]}..{span.after[:12]}")
    return sorted(line for line in out.splitlines() if line)


def _top(root: Path) -> Path:
    top = run_git(root, "rev-parse", "--show-toplevel")
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
    """The sections of trainops.yaml (spec.X, metadata, environments.ENV.X) that differ from
    `before`, both read by the manifest's own hardened loader (size cap, alias bombs, depth)."""

    size = run_git(manifest.root, "cat-file", "-s", f"{before}:{rel}")
    old_text = run_git(manifest.root, "show", f"{before}:{rel}") if size and int(size) <= MAX_BYTES else None
    try:
        old = load_yaml_mapping(old_text.encode("utf-8")).data if old_text is not None else None
        new = load_yaml_mapping(manifest.path.read_bytes()).data
    except (YamlProblem, OSError):
        return ["spec"]
    a, b = _overlay_sections(old, manifest.env), _overlay_sections(new, manifest.env)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def _stage_of(section: str) -> str:
    name = section.rsplit(".", 1)[-1]
    return SECTION_STAGE.get(name, STAGES[0])


def classify(*, manifest: Manifest, span: PushRange) -> Decision:
    """Which stages the pushed change affects (see the module docstring)."""

    defined = [n.name for n in build_graph(manifest=manifest)]
    if span.after is None:
        old = f" (it was at {span.before[:12]})" if span.before else ""
        return Decision(None, f"the branch was deleted{old}: nothing runs")
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


SAME_CONTENT_DEPTH = 50  # first-parent ancestors looked at for the commit a no-op one has the content of


def same_content(manifest: Manifest, commit: str) -> Iterator[str]:
    """The first-parent ancestors of commit from which nothing trainops tracks changed (the
    training code and trainops.yaml, as `trainops ci` decides), nearest first; it stops at
    the first change that would run a stage."""
    found = run_git(manifest.root, "rev-list", "--first-parent", f"--max-count={SAME_CONTENT_DEPTH}", commit)
    for ancestor in (found or "").split()[1:]:
        if classify(manifest=manifest, span=PushRange(ancestor, commit, "lineage")).start is not None:
            return
        yield ancestor


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
    data_properties: ClassVar[tuple[str, ...]] = ("dry_run", "range", "exit_code")

    @property
    def dry_run(self) -> bool | None:
        """Whether the stages that ran were a dry run (None: none ran)."""
        return self.run.dry_run if self.run is not None else None

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
    until: str | None = None,
    on_event: EventSink = no_events,
) -> CiResult:
    """Read the pushed range, classify it, and run the affected stages from the first one
    (and any stage before it whose output is missing); with options.dry_run, say what would."""

    span = push_range(root=manifest.root, since=since, until=until, environ=environ)
    decision = classify(manifest=manifest, span=span)
    result = CiResult(pipeline=manifest.pipeline.metadata.name, span=span, decision=decision)
    if decision.start is None:
        return result
    window = replace(options, start=decision.start, run_missing_upstream=True)
    result.run = run_pipeline(manifest=manifest, options=window, on_event=on_event)
    return result
