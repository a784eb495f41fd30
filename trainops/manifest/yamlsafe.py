"""A strict, position-keeping, hostile-input-safe YAML loader for manifests.

PyYAML's parser produces the event stream (libyaml when available); this module builds
plain Python data from it itself, so that it can:

- remember the line and column of every key and value (for `FILE:LINE:COL` errors);
- reject duplicate keys, several documents, unknown tags and non-string keys;
- bound the work an input can cause: file size, nesting depth, and the number of nodes
  after alias expansion (a "billion laughs" document fails after a few hundred thousand
  nodes, in milliseconds, instead of expanding exponentially);
- resolve plain scalars with the YAML 1.2 core schema, so `no`, `on` and `0777` stay
  what a YAML 1.2 reader (and a person) expects: strings and decimals.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000
DEPTH_MESSAGE = f"nesting deeper than {MAX_DEPTH} levels; flatten the document"


@dataclass(frozen=True)
class Mark:
    """A 1-based position in a file."""

    line: int
    column: int


class YMap(dict[str, Any]):
    """A mapping that knows where each of its keys and values was written."""

    def __init__(self, mark: Mark) -> None:
        super().__init__()
        self.mark = mark
        self.key_marks: dict[str, Mark] = {}
        self.value_marks: dict[str, Mark] = {}


class YSeq(list[Any]):
    """A sequence that knows where each of its items was written."""

    def __init__(self, mark: Mark) -> None:
        super().__init__()
        self.mark = mark
        self.item_marks: list[Mark] = []


class YamlProblem(Exception):
    """A document that cannot be loaded; carries where and why."""

    def __init__(self, mark: Mark, message: str) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message


@dataclass
class LoadResult:
    data: YMap
    duplicates: list[YamlProblem]


_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL_TRUE = re.compile(r"^(?:true|True|TRUE)$")
_BOOL_FALSE = re.compile(r"^(?:false|False|FALSE)$")
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")

_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")}


def _mark(m: Any) -> Mark:
    return Mark(line=m.line + 1, column=m.column + 1)


def resolve_plain(text: str) -> Any:
    """Resolve an untagged plain scalar by the YAML 1.2 core schema."""
    if _NULL.match(text):
        return None
    if _BOOL_TRUE.match(text):
        return True
    if _BOOL_FALSE.match(text):
        return False
    if _INT10.match(text):
        return int(text, 10)
    if _INT8.match(text):
        return int(text[2:], 8)
    if _INT16.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return float("-inf") if text.startswith("-") else float("inf")
    if _NAN.match(text):
        return float("nan")
    return text


def _tagged_scalar(event: Any) -> Any:
    tag, value, mark = event.tag, event.value, _mark(event.start_mark)
    if tag is None:
        return resolve_plain(value) if event.implicit[0] else value
    if tag == "!":
        return value
    if tag not in _SCALAR_TAGS:
        raise YamlProblem(mark, f"unsupported tag {tag!r}; manifests use plain YAML values")
    kind = tag[len(_CORE) :]
    if kind == "str":
        return value
    resolved = resolve_plain(value)
    expected: dict[str, type | tuple[type, ...]] = {"int": int, "float": (float, int), "bool": bool, "null": type(None)}
    if (isinstance(resolved, bool) and kind != "bool") or not isinstance(resolved, expected[kind]):
        raise YamlProblem(mark, f"{value!r} is not a valid !!{kind}")
    checked: Any = resolved
    return float(checked) if kind == "float" else checked


def _events(text: str) -> Iterator[Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.parse(text, Loader=loader)


class _Builder:
    """Turns parser events into YMap/YSeq/scalars, iteratively and within limits."""

    def __init__(self) -> None:
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.nodes = 0
        self.duplicates: list[YamlProblem] = []
        # Stack frames: [container, pending_key, pending_key_mark, anchor, start_nodes, merges]
        self.stack: list[list[Any]] = []
        self.root: Any = None
        self.documents = 0

    def _count(self, n: int, mark: Mark) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise YamlProblem(
                mark,
                f"document expands to more than {MAX_NODES} nodes (an alias bomb?); a manifest needs far fewer",
            )

    def _add(self, value: Any, mark: Mark) -> None:
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        container = frame[0]
        if isinstance(container, YSeq):
            container.append(value)
            container.item_marks.append(mark)
            return
        if frame[1] is _NO_KEY:
            if not isinstance(value, str):
                raise YamlProblem(mark, "mapping keys must be plain strings")
            frame[1], frame[2] = value, mark
            return
        key, key_mark = frame[1], frame[2]
        frame[1] = _NO_KEY
        if key == "<<" and frame[6]:
            self._merge(frame, value, mark)
            return
        if key in container:
            first = container.key_marks[key]
            if key in frame[5]:  # came from a merge key: explicit keys win
                frame[5].discard(key)
            else:
                self.duplicates.append(
                    YamlProblem(key_mark, f"duplicate key {key!r} (first written at line {first.line})")
                )
                return
        container[key] = value
        container.key_marks[key] = key_mark
        container.value_marks[key] = mark

    def _merge(self, frame: list[Any], value: Any, mark: Mark) -> None:
        sources = value if isinstance(value, list) else [value]
        container: YMap = frame[0]
        for source in sources:
            if not isinstance(source, YMap):
                raise YamlProblem(mark, "a merge key (<<) takes an alias of a mapping or a list of them")
            for k, v in source.items():
                if k not in container:
                    container[k] = v
                    container.key_marks[k] = source.key_marks[k]
                    container.value_marks[k] = source.value_marks[k]
                    frame[5].add(k)

    def feed(self, event: Any) -> None:
        mark = _mark(event.start_mark)
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise YamlProblem(mark, "expected one YAML document, found several; keep one per file")
            return
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in self.anchors:
                raise YamlProblem(mark, f"unknown alias *{event.anchor}")
            aliased, size = self.anchors[event.anchor]
            self._count(size, mark)
            self._add(aliased, mark)
            return
        if isinstance(event, yaml.ScalarEvent):
            self._count(1, mark)
            if self.stack and isinstance(self.stack[-1][0], YMap) and self.stack[-1][1] is _NO_KEY:
                value: Any = event.value  # keys stay the text that was written
                if event.tag not in (None, "!", _CORE + "str") and event.implicit == (False, False):
                    raise YamlProblem(mark, f"unsupported tag {event.tag!r} on a key")
                self.stack[-1][6] = bool(event.implicit[0]) and value == "<<"
            else:
                value = _tagged_scalar(event)
            if event.anchor:
                self.anchors[event.anchor] = (value, 1)
            self._add(value, mark)
            return
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self._count(1, mark)
            if len(self.stack) >= MAX_DEPTH:
                raise YamlProblem(mark, DEPTH_MESSAGE)
            is_map = isinstance(event, yaml.MappingStartEvent)
            expected = _CORE + ("map" if is_map else "seq")
            if event.tag not in (None, "!", expected):
                raise YamlProblem(mark, f"unsupported tag {event.tag!r}")
            if self.stack and isinstance(self.stack[-1][0], YMap) and self.stack[-1][1] is _NO_KEY:
                raise YamlProblem(mark, "mapping keys must be plain strings, not collections")
            container: Any = YMap(mark) if is_map else YSeq(mark)
            self.stack.append([container, _NO_KEY, None, event.anchor, self.nodes, set(), False])
            return
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            container, _, _, anchor, start, _, _ = self.stack.pop()
            if anchor:
                self.anchors[anchor] = (container, self.nodes - start + 1)
            self._add(container, container.mark)


_NO_KEY = object()


def _position_of(text: str, index: int) -> Mark:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return Mark(line, column)


def load_yaml_mapping(raw: bytes) -> LoadResult:
    """Load one YAML document that must be a mapping. Raises YamlProblem on the first fatal issue.

    Duplicate keys are not fatal: they are collected so that every one is reported.
    """
    if len(raw) > MAX_BYTES:
        raise YamlProblem(
            Mark(1, 1),
            f"file is {len(raw) / 2**20:.1f} MiB; a manifest may be at most {MAX_BYTES // 2**20} MiB",
        )
    body = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        prefix = body[: err.start].decode("utf-8")
        raise YamlProblem(_position_of(prefix, len(prefix)), "file is not valid UTF-8 text") from None
    if "\x00" in text:
        raise YamlProblem(_position_of(text, text.index("\x00")), "file contains a NUL byte; not YAML text")
    builder = _Builder()
    try:
        for event in _events(text):
            builder.feed(event)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = _mark(mark) if mark is not None else Mark(1, 1)
        reason = err.problem or err.context or "invalid YAML"
        if "nesting depth" in reason:  # newer libyaml stops deep documents itself, reading ahead
            raise YamlProblem(where, DEPTH_MESSAGE) from None
        raise YamlProblem(where, f"invalid YAML: {reason}") from None
    except yaml.YAMLError as err:
        if "nesting depth" in str(err):
            raise YamlProblem(Mark(1, 1), DEPTH_MESSAGE) from None
        raise YamlProblem(Mark(1, 1), f"invalid YAML: {err}") from None
    root = builder.root
    if root is None:
        raise YamlProblem(Mark(1, 1), "the file is empty; a manifest is a YAML mapping")
    if not isinstance(root, YMap):
        names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
        kind = "a list" if isinstance(root, list) else names.get(type(root), "a scalar")
        raise YamlProblem(Mark(1, 1), f"expected a YAML mapping at the top, found {kind}")
    return LoadResult(data=root, duplicates=builder.duplicates)
