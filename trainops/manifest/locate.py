"""Turn pydantic validation errors into located, readable problems with did-you-mean hints."""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from trainops.errors import Problem
from trainops.manifest.common import PATTERN_NAMES
from trainops.manifest.yamlsafe import Mark, YMap, YSeq


def format_path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def walk(root: YMap, loc: Sequence[str | int]) -> tuple[list[str | int], Mark, Mark, Any, bool]:
    """Follow loc through the data as far as it goes.

    Returns the path that exists (union tags dropped), the key mark and value mark of the
    deepest node found, that node, and whether the whole loc was found.
    """
    node: Any = root
    found: list[str | int] = []
    key_mark = value_mark = root.mark
    complete = True
    for i, part in enumerate(loc):
        if isinstance(node, YMap) and isinstance(part, str) and part in node:
            found.append(part)
            key_mark, value_mark = node.key_marks[part], node.value_marks[part]
            node = node[part]
        elif isinstance(node, YSeq) and isinstance(part, int) and 0 <= part < len(node):
            found.append(part)
            key_mark = value_mark = node.item_marks[part]
            node = node[part]
        elif isinstance(node, (YMap, YSeq)) and i == len(loc) - 1:
            complete = False  # a missing key: the last part names it
        # otherwise: a union tag pydantic adds to loc; it names no data, skip it
    return found, key_mark, value_mark, node, complete


def _unwrap(tp: Any) -> list[Any]:
    """The concrete types an annotation may hold (Annotated, Optional and unions opened)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg)]
    return [tp]


def _models_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[type[BaseModel]]:
    """The models that may stand at loc (a union gives several)."""
    candidates: list[Any] = [model]
    for part in loc:
        stepped: list[Any] = []
        for tp in candidates:
            origin = typing.get_origin(tp)
            if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
                for name, field in tp.model_fields.items():
                    if (field.alias or name) == part:
                        stepped.extend(_unwrap(field.annotation))
            elif origin is list and isinstance(part, int):
                stepped.extend(_unwrap(typing.get_args(tp)[0]))
            elif origin is dict and isinstance(part, str):
                stepped.extend(_unwrap(typing.get_args(tp)[1]))
        if stepped:
            candidates = stepped
    return [tp for tp in candidates if isinstance(tp, type) and issubclass(tp, BaseModel)]


def _allowed_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys the model at loc accepts (by YAML alias)."""
    return [f.alias or n for tp in _models_at(model, loc) for n, f in tp.model_fields.items()]


def _required_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys the model at loc cannot do without (by YAML alias)."""
    return [f.alias or n for tp in _models_at(model, loc) for n, f in tp.model_fields.items() if f.is_required()]


def unknown_key_message(key: str, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    camel = to_camel(key)
    if camel != key and camel in allowed:
        return f"unknown field {key!r}; did you mean {camel!r}? (keys are camelCase)"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown field {key!r}; did you mean {close[0]!r}?"
    if allowed and len(allowed) <= 16:
        return f"unknown field {key!r}; allowed: {', '.join(sorted(allowed))}"
    return f"unknown field {key!r}"


_TIDY = (
    (re.compile(r"^(Value error|Assertion failed), "), ""),
    (re.compile(r"^(Input|String|List|Dictionary|Value) should"), "should"),
    (re.compile(r" after validation, not \d+$"), ""),
    (re.compile(r", unable to parse string as an? \w+$"), ""),
    (re.compile(r"should be a valid dictionary or instance of \w+"), "should be a mapping"),
    (re.compile(r"should be a valid list"), "should be a list"),
)


def _message(error: Mapping[str, Any]) -> tuple[str, str]:
    """The readable message of one error, and the offending value shown as `(got …)`."""
    kind, msg = error["type"], str(error["msg"])
    pattern = (error.get("ctx") or {}).get("pattern")
    if kind == "string_pattern_mismatch" and pattern in PATTERN_NAMES:
        msg = f"should be {PATTERN_NAMES[pattern]}"
    for regex, replacement in _TIDY:
        msg = regex.sub(replacement, msg)
    value = error.get("input")
    got = ""
    if kind not in ("value_error", "assertion_error", "missing") and isinstance(value, (str, int, float, bool)):
        shown = repr(value)
        got = f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return msg, got


def _overlay_path(root: YMap, env: str, loc: Sequence[str | int], path: str, mark: Mark) -> str:
    """`spec.X` → `environments.ENV.X` when the value at fault came from the overlay (its
    mark is the overlay's): the user wrote it there, so that is where they look."""
    if not loc or loc[0] != "spec" or not (path == "spec" or path.startswith(("spec.", "spec["))):
        return path
    found, key_mark, value_mark, _, _ = walk(root, ("environments", env, *loc[1:]))
    if len(found) <= 2 or (mark.line, mark.column) not in {(m.line, m.column) for m in (key_mark, value_mark)}:
        return path
    return format_path(["environments", env]) + path[len("spec") :]


def problem_at(root: YMap, loc: Sequence[str | int], message: str, *, file: str, env: str | None = None) -> Problem:
    """A Problem at the line of `loc` (the deepest part of it the data has; the overlay's line when
    the environment's overlay set it), for checks made after validation."""
    found, key_mark, _value_mark, _node, _complete = walk(root, loc)
    path = format_path(found)
    if env is not None:
        path = _overlay_path(root, env, loc, path, key_mark)
    return Problem(file=file, line=key_mark.line, column=key_mark.column, path=path, message=message, env=env)


def problems_from_validation(
    err: ValidationError, *, root: YMap, file: str, model: type[BaseModel], env: str | None = None
) -> list[Problem]:
    """One Problem per located error; union alternatives at one place are joined."""
    merged: dict[tuple[str, int, int], tuple[list[str], str]] = {}
    for error in err.errors(include_url=False):
        loc = tuple(error["loc"])
        found, key_mark, value_mark, node, complete = walk(root, loc)
        kind = error["type"]
        got = ""
        if kind == "extra_forbidden":
            key = str(loc[-1])
            msg = unknown_key_message(key, _allowed_keys(model, loc[:-1]))
            mark, path = key_mark, format_path(found)
        elif kind == "missing" and not complete:
            msg = f"missing required field {loc[-1]!r}"
            mark, path = key_mark, format_path([*found, loc[-1]])
        elif kind == "model_type" and error.get("input") is None and complete:
            # `metadata:` with nothing under it: say what is missing, not "should be a mapping"
            required = _required_keys(model, loc)
            listed = ", ".join(repr(key) for key in required)
            msg = f"is empty: missing required field {listed}" if required else "is empty: should be a mapping"
            mark, path = key_mark, format_path(found)
        else:
            msg, got = _message(error)
            container = isinstance(node, (YMap, YSeq))
            is_key = bool(loc) and loc[-1] == "[key]"
            mark = key_mark if container or is_key else value_mark
            path = format_path(found)
        if env is not None:
            path = _overlay_path(root, env, loc, path, mark)
        slot = (path, mark.line, mark.column)
        msgs, _ = merged.setdefault(slot, ([], got))
        if msg not in msgs:
            msgs.append(msg)
    return [
        Problem(file=file, line=line, column=col, path=path, message=" or ".join(msgs) + got, env=env)
        for (path, line, col), (msgs, got) in merged.items()
    ]
