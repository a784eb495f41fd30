"""Load trainops.yaml: read safely, merge an environment overlay, validate, locate every problem."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainops.errors import InputError, ManifestError, NotFoundError, Problem
from trainops.manifest.disagg_checks import disaggregation_problems
from trainops.manifest.locate import format_path, problem_at, problems_from_validation, walk
from trainops.manifest.pipeline import Pipeline
from trainops.manifest.slo_catalog import resolve
from trainops.manifest.stages import TrainSpec
from trainops.manifest.yamlsafe import MAX_BYTES, YamlProblem, YMap, load_yaml_mapping

DEFAULT_MANIFEST = "trainops.yaml"


@dataclass(frozen=True)
class Manifest:
    """A validated manifest, with the environment overlay (if any) applied."""

    path: Path
    pipeline: Pipeline
    env: str | None = None

    @property
    def root(self) -> Path:
        """The directory relative paths in the manifest are resolved against."""
        return self.path.parent

    def require_train(self) -> TrainSpec:
        """spec.train, for what needs it (rendering, running or evaluating where training runs)."""
        train = self.pipeline.spec.train
        if train is None:
            raise InputError(
                f"{self.path.name} has no train section", hint="add spec.train (command, scheduler, nodes)"
            )
        return train

    def local_path(self, value: str) -> Path:
        """A path from the manifest, resolved against its directory."""
        candidate = Path(value)
        return candidate if candidate.is_absolute() else (self.root / candidate)


@dataclass
class CheckReport:
    """The outcome of checking a manifest (the base document and each environment)."""

    path: Path
    environments: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _display(path: Path) -> str:
    return str(path)


def read_manifest(path: Path) -> tuple[YMap, list[Problem]]:
    """Read and parse; fatal YAML problems raise, duplicate keys are returned as problems."""
    shown = _display(path)
    if path.is_dir():
        raise InputError(f"{shown} is a directory", hint=f"pass the manifest file, such as {shown}/{DEFAULT_MANIFEST}")
    try:
        raw = _read_bounded(path, shown)
    except FileNotFoundError:
        raise NotFoundError(
            f"no manifest at {shown}", hint="pass -f FILE, or create one with `trainops init`"
        ) from None
    except OSError as err:
        raise InputError(f"cannot read {shown}: {err.strerror}") from None
    try:
        loaded = load_yaml_mapping(raw)
    except YamlProblem as err:
        raise ManifestError([Problem(shown, err.mark.line, err.mark.column, "", err.message)]) from None
    dups = [Problem(shown, d.mark.line, d.mark.column, "", d.message) for d in loaded.duplicates]
    return loaded.data, dups


def _read_bounded(path: Path, shown: str) -> bytes:
    """Read at most MAX_BYTES + 1 bytes: a huge (or endless) file never reaches memory whole."""
    with path.open("rb") as fh:
        data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            size = max(os.fstat(fh.fileno()).st_size, len(data))
            raise ManifestError(
                [
                    Problem(
                        shown,
                        1,
                        1,
                        "",
                        f"file is {size / 2**20:.1f} MiB; a manifest may be at most {MAX_BYTES // 2**20} MiB",
                    )
                ]
            )
    return data


def merge_overlay(base: Any, overlay: Any) -> Any:
    """Mappings merge key by key, lists and scalars replace, null removes a key.

    Positions travel with the values, so an error in an overlaid value points at the line
    of the overlay that wrote it.
    """
    if not (isinstance(base, YMap) and isinstance(overlay, YMap)):
        return overlay
    merged = YMap(base.mark)
    for key, value in base.items():
        merged[key] = value
        merged.key_marks[key] = base.key_marks[key]
        merged.value_marks[key] = base.value_marks[key]
    for key, value in overlay.items():
        if value is None:
            merged.pop(key, None)
            continue
        merged[key] = merge_overlay(merged[key], value) if key in merged else value
        merged.key_marks[key] = overlay.key_marks[key]
        merged.value_marks[key] = overlay.value_marks[key]
    return merged


def _environment_names(data: YMap) -> list[str]:
    envs = data.get("environments")
    return list(envs) if isinstance(envs, YMap) else []


def _with_env(data: YMap, env: str, shown: str) -> YMap:
    names = _environment_names(data)
    if env not in names:
        close = difflib.get_close_matches(env, names, n=1)
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else (f"defined: {', '.join(names)}" if names else "this manifest defines no environments")
        )
        raise NotFoundError(f"environment {env!r} is not defined in {shown}", hint=hint)
    overlay = data["environments"][env]
    if not isinstance(overlay, YMap) or not isinstance(data.get("spec"), YMap):
        return data  # validation of the document reports the wrong shape
    effective = YMap(data.mark)
    for key, value in data.items():
        effective[key] = merge_overlay(value, overlay) if key == "spec" else value
        effective.key_marks[key] = data.key_marks[key]
        effective.value_marks[key] = data.value_marks[key]
    return effective


def _validate(data: YMap, shown: str, env: str | None) -> tuple[Pipeline | None, list[Problem]]:
    try:
        pipeline = Pipeline.model_validate(data)
    except ValidationError as err:
        return None, problems_from_validation(err, root=data, file=shown, model=Pipeline, env=env)
    return pipeline, _cross_problems(pipeline, data, shown, env)


def _cross_problems(pipeline: Pipeline, data: YMap, shown: str, env: str | None) -> list[Problem]:
    """Checks across sections, each at the line of the field at fault (spec.slo: the model it
    names, a latency threshold on the engine's histogram)."""

    found = [*resolve(pipeline).problems, *disaggregation_problems(pipeline.spec)]
    return [problem_at(data, loc, message, file=shown, env=env) for loc, message in found]


def load_manifest(path: Path, *, env: str | None = None) -> Manifest:
    """Load and validate a manifest; raise ManifestError listing every problem."""
    shown = _display(path)
    data, problems = read_manifest(path)
    effective = _with_env(data, env, shown) if env else data
    pipeline, found = _validate(effective, shown, env)
    problems += found
    if problems or pipeline is None:
        raise ManifestError(problems)
    return Manifest(path=path.resolve(), pipeline=pipeline, env=env)


def _spec_path(problem: Problem) -> str:
    """The path a problem located in an overlay has in the merged spec (`environments.dev.train`
    → `spec.train`): a base mistake the overlay only repeats is the base's."""
    prefix = f"environments.{problem.env}"
    if problem.env and (problem.path == prefix or problem.path.startswith(prefix + ".")):
        return "spec" + problem.path[len(prefix) :]
    return problem.path


def check_manifest(path: Path, *, env: str | None = None) -> CheckReport:
    """Check a manifest as `trainops validate` does.

    With an environment, check that one; without, check the base document and then every
    environment it defines, so a mistake in the prod overlay is caught on a dev laptop.
    Problems are reported once, even when several environments share them.
    """
    shown = _display(path)
    data, problems = read_manifest(path)
    report = CheckReport(path=path)
    targets: list[str | None] = [env] if env else [None, *_environment_names(data)]
    # An overlay's mistake is found twice (in environments and in the merged spec), and a
    # base mistake the overlay leaves alone is found again in every environment: once is enough.
    seen = {(p.line, p.column, p.message) for p in problems}
    base_errors: set[tuple[str, str]] = set()
    for target in targets:
        effective = _with_env(data, target, shown) if target else data
        _, found = _validate(effective, shown, target)
        for problem in found:
            key = (problem.line, problem.column, problem.message)
            if key in seen or (target and (_spec_path(problem), problem.message) in base_errors):
                continue
            seen.add(key)
            problems.append(problem)
        if target:
            report.environments.append(target)
        else:
            base_errors = {(p.path, p.message) for p in found}
    report.problems = sorted(problems, key=lambda p: (p.line, p.column, p.env or ""))
    return report


def field_problem(path: Path, *, env: str | None, loc: Sequence[str | int], message: str) -> Problem:
    """A Problem at the manifest line of `loc` (the deepest part of it the file has; an
    environment's overlay where it sets the field), for checks made after loading (a cluster's)."""

    shown = _display(path)
    data, _ = read_manifest(path)
    effective = _with_env(data, env, shown) if env else data
    found, key_mark, _value_mark, _node, _complete = walk(effective, loc)
    return Problem(
        file=shown, line=key_mark.line, column=key_mark.column, path=format_path(found), message=message, env=env
    )
