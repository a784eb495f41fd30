"""Upstream CRD schemas as strict JSON Schema validators.

The crds directory (default: the CRDs vendored byte-for-byte in trainops/render/crds/, see
SOURCES.md; `--crds DIR` replaces it) is indexed by each CRD's spec.group and
spec.names.kind, read from the first events of each file's YAML stream, so a check loads
only the CRDs of the kinds it meets. Loaded schemas are cached.

Strictness. The API server silently prunes a field its structural schema does not declare,
so a misspelt field in git is a field that never reaches the cluster. Every object schema
that declares `properties` (or, like `{type: object}` in a nested position, declares none)
is therefore closed — an undeclared key is an error at its own path — unless it says
`x-kubernetes-preserve-unknown-fields: true` or gives `additionalProperties`. Also honoured:
`x-kubernetes-int-or-string` (an integer or a string), `nullable`, `format: int32/int64`
(as ranges), `x-kubernetes-embedded-resource` (apiVersion/kind/metadata allowed),
`x-kubernetes-list-type: map/set` (no duplicate keys/items, which the API server refuses).
Not evaluated: CEL rules (`x-kubernetes-validations`), other formats, and the root
`metadata`, which `trainops.render.validate` checks as ObjectMeta.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from trainops.errors import InputError, NotFoundError

VENDORED = Path(__file__).resolve().parent / "crds"
CLOSED = "x-trainops-closed"
_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_DROP = {"description", "default", "example", "externalDocs", "x-kubernetes-validations", "format", "nullable"}

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # PyYAML without libyaml
    _Loader = yaml.SafeLoader


@dataclass(frozen=True)
class CrdRef:
    """Where the CRD of a (group, kind) is: a file and the document in it."""

    path: Path
    document: int
    group: str
    kind: str


@dataclass(frozen=True)
class CrdVersion:
    group: str
    kind: str
    version: str
    scope: str  # Namespaced or Cluster
    served: bool
    deprecated: bool
    versions: tuple[str, ...]
    source: str


def _scan(path: Path) -> list[tuple[int, str, str]]:
    """(document, group, kind) of the CRDs in one file, from its YAML events.

    A single-document file stops at the first spec.group and spec.names.kind (controller-gen
    writes them before the schemas), so indexing never parses a whole schema.
    """
    data = path.read_bytes()
    single = re.search(rb"(^|\n)---", data[3:] if data.startswith(b"---") else data) is None
    found: list[tuple[int, str, str]] = []
    doc = -1
    stack: list[Any] = []  # per open collection: [kind, pending key or None, key path]
    group = kind = ""
    keypath: tuple[str, ...] = ()
    for event in yaml.parse(data, Loader=_Loader):
        if isinstance(event, yaml.DocumentStartEvent):
            doc += 1
            stack, group, kind = [], "", ""
            continue
        if isinstance(event, yaml.DocumentEndEvent):
            if group and kind:
                found.append((doc, group, kind))
            continue
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            parent = stack[-1] if stack else None
            if parent is not None and parent[0] == "map":
                keypath = (*parent[2], parent[1] or "")
                parent[1] = None
            else:
                keypath = parent[2] if parent is not None else ()
            stack.append(["map" if isinstance(event, yaml.MappingStartEvent) else "seq", None, keypath])
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
            continue
        if isinstance(event, yaml.ScalarEvent) and stack and stack[-1][0] == "map":
            top = stack[-1]
            if top[1] is None:
                top[1] = event.value
                continue
            where = (*top[2], top[1])
            if where == ("spec", "group"):
                group = str(event.value)
            elif where == ("spec", "names", "kind"):
                kind = str(event.value)
            top[1] = None
            if single and group and kind:
                return [(doc, group, kind)]
        elif isinstance(event, yaml.AliasEvent) and stack and stack[-1][0] == "map":
            stack[-1][1] = None
    return found


def _fingerprint(crds_dir: Path) -> tuple[tuple[str, int, int], ...]:
    if not crds_dir.is_dir():
        raise NotFoundError(f"no CRD directory {crds_dir}", hint="pass --crds DIR with the CRD YAML files")
    out = []
    for path in sorted(crds_dir.iterdir()):
        if path.suffix in (".yaml", ".yml") and path.is_file():
            stat = path.stat()
            out.append((path.name, stat.st_mtime_ns, stat.st_size))
    return tuple(out)


@lru_cache(maxsize=8)
def _index(crds_dir: Path, fingerprint: tuple[tuple[str, int, int], ...]) -> dict[tuple[str, str], CrdRef]:
    index: dict[tuple[str, str], CrdRef] = {}
    for name, _, _ in fingerprint:
        path = crds_dir / name
        try:
            entries = _scan(path)
        except yaml.YAMLError as err:
            raise InputError(
                f"{path} is not valid YAML: {err}", hint="fix or remove it from the CRD directory"
            ) from None
        for doc, group, kind in entries:
            index.setdefault((group, kind), CrdRef(path, doc, group, kind))
    return index


def crd_index(crds_dir: Path | None = None) -> dict[tuple[str, str], CrdRef]:
    """(group, kind) → where its CRD is, for the CRDs in crds_dir (default: the vendored ones)."""
    root = (crds_dir or VENDORED).resolve()
    return _index(root, _fingerprint(root))


@lru_cache(maxsize=32)
def _document(path: Path, document: int, mtime_ns: int) -> dict[str, Any]:
    with path.open("rb") as fh:
        for i, doc in enumerate(yaml.load_all(fh, Loader=_Loader)):
            if i == document:
                if not isinstance(doc, dict):
                    break
                return doc
    raise InputError(f"{path}: document {document} is not a CustomResourceDefinition")


def _crd(ref: CrdRef) -> dict[str, Any]:
    return _document(ref.path, ref.document, ref.path.stat().st_mtime_ns)


def crd_version(ref: CrdRef, version: str) -> tuple[CrdVersion, dict[str, Any] | None]:
    """The CRD's facts about one version and its openAPIV3Schema (None when it has no such version)."""
    crd = _crd(ref)
    spec = crd.get("spec") or {}
    versions = spec.get("versions") or []
    names = tuple(str(v.get("name")) for v in versions if isinstance(v, dict))
    for entry in versions:
        if isinstance(entry, dict) and entry.get("name") == version:
            schema = ((entry.get("schema") or {}).get("openAPIV3Schema")) or None
            facts = CrdVersion(
                ref.group,
                ref.kind,
                version,
                str(spec.get("scope", "Namespaced")),
                bool(entry.get("served", False)),
                bool(entry.get("deprecated", False)),
                names,
                ref.path.name,
            )
            return facts, schema
    facts = CrdVersion(
        ref.group, ref.kind, version, str(spec.get("scope", "Namespaced")), False, False, names, ref.path.name
    )
    return facts, None


def strict_schema(node: Any, *, branch: bool = False) -> Any:
    """A CRD (structural, OpenAPI v3) schema as a closed JSON Schema; see the module docstring.

    branch: inside anyOf/oneOf/allOf/not, where structural schemas only constrain values,
    nothing is closed.
    """
    if isinstance(node, list):
        return [strict_schema(item, branch=branch) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strict_schema(sub, branch=branch) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = strict_schema(value, branch=branch)
        elif key in ("anyOf", "oneOf", "allOf"):
            out[key] = [strict_schema(item, branch=True) for item in value]
        elif key == "not":
            out[key] = strict_schema(value, branch=True)
        else:
            out[key] = copy.deepcopy(value)
    fmt = node.get("format")
    if fmt in _INT_RANGE and node.get("type") == "integer":
        low, high = _INT_RANGE[fmt]
        out["minimum"] = max(out.get("minimum", low), low)
        out["maximum"] = min(out.get("maximum", high), high)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if node.get("x-kubernetes-embedded-resource") and "properties" in out:
        out["properties"].setdefault("apiVersion", {"type": "string"})
        out["properties"].setdefault("kind", {"type": "string"})
        out["properties"].setdefault("metadata", {"type": "object"})
    is_object = node.get("type") == "object" or "properties" in node
    open_ = node.get("x-kubernetes-preserve-unknown-fields") is True or "additionalProperties" in node
    if is_object and not open_ and not branch:
        out.setdefault("properties", {})
        out[CLOSED] = True
    return out


def _closed(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    # lazy: loads jsonschema
    from jsonschema import ValidationError  # type: ignore[import-untyped,unused-ignore]

    if not value or not isinstance(instance, dict):
        return
    known = list(schema.get("properties", {}))
    for key in instance:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = (
                f"; did you mean {close[0]}?"
                if close
                else (f"; known fields: {', '.join(known)}" if len(known) <= 12 and known else "")
            )
            yield ValidationError(
                f"unknown field: the API server would drop it without a word{hint}", path=deque([key]), validator=CLOSED
            )


def _list_type(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError  # lazy: loads jsonschema

    if not isinstance(instance, list) or value not in ("map", "set"):
        return
    seen: dict[str, int] = {}
    keys = schema.get("x-kubernetes-list-map-keys") or []
    item_props = (schema.get("items") or {}).get("properties") or {}
    for i, item in enumerate(instance):
        if value == "map":
            if not isinstance(item, dict):
                continue
            ident = tuple((k, item.get(k, (item_props.get(k) or {}).get("default"))) for k in keys)
            text = json.dumps(ident, sort_keys=True, default=str)
            label = ", ".join(f"{k}={v}" for k, v in ident)
        else:
            text = json.dumps(item, sort_keys=True, default=str)
            label = json.dumps(item, default=str)
        if text in seen:
            yield ValidationError(
                f"duplicate entry ({label}); the first is at index {seen[text]}",
                path=deque([i]),
                validator="x-kubernetes-list-type",
            )
        else:
            seen[text] = i


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    from jsonschema import Draft4Validator, validators  # lazy: loads jsonschema

    return validators.extend(Draft4Validator, {CLOSED: _closed, "x-kubernetes-list-type": _list_type})


def make_validator(schema: dict[str, Any]) -> Any:
    """A validator for an already strict schema (strict_schema, or one of trainops.render.builtin)."""
    return _validator_class()(schema)


def _without_root_metadata(schema: dict[str, Any]) -> dict[str, Any]:
    out = dict(schema)
    props = dict(out.get("properties") or {})
    props["metadata"] = {"type": "object"}  # ObjectMeta: checked by trainops.render.validate
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    out["properties"] = props
    return out


@lru_cache(maxsize=64)
def _cached_validator(path: Path, document: int, mtime_ns: int, version: str, group: str, kind: str) -> Any:
    _, schema = crd_version(CrdRef(path, document, group, kind), version)
    if schema is None:
        return None
    strict = strict_schema(schema)
    return make_validator(_without_root_metadata(strict))


def crd_validator(ref: CrdRef, version: str) -> tuple[CrdVersion, Any]:
    """The CRD's facts about a version and a strict validator of it (None when there is no such version)."""
    facts, _ = crd_version(ref, version)
    validator = _cached_validator(ref.path, ref.document, ref.path.stat().st_mtime_ns, version, ref.group, ref.kind)
    return facts, validator


def subschema(ref: CrdRef, version: str, path: list[str]) -> dict[str, Any]:
    """A strict part of a CRD's schema, following properties (and `[]` for array items)."""
    _, schema = crd_version(ref, version)
    if schema is None:
        raise InputError(f"{ref.path} has no version {version} of {ref.kind}")
    node: Any = schema
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    result = strict_schema(node)
    assert isinstance(result, dict)
    return result
