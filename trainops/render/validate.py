"""Rendered objects checked as their API servers would: one SchemaProblem per mistake.

Each object is checked against the CRD of its apiVersion/kind in the crds directory
(strictly; see trainops.render.crds), else against trainops' schema for kinds without a
vendored CRD (see trainops.render.builtin); a kind with neither is a problem. ObjectMeta,
which CRD schemas leave out, is checked here: a name (its rules depend on the kind), a
namespace only on namespaced kinds, label keys and values, annotation keys and their total
size, no fields the API server sets. Pod template labels and annotations get the same
checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from trainops.render.builtin import SCOPES, builtin_validator
from trainops.render.crds import CLOSED, crd_index, crd_validator
from trainops.render.model import SchemaProblem
from trainops.render.names import DNS_1035_RE, DNS_LABEL_RE, DNS_SUBDOMAIN_RE, LABEL_NAME_RE

_META_ALLOWED = ("name", "generateName", "namespace", "labels", "annotations", "finalizers", "ownerReferences")
_SERVER_SET = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
_MAX_ANNOTATIONS = 256 * 1024
# Kinds whose names become DNS labels (pod hostnames, Services, label values).
_LABEL_NAMED = {
    ("v1", "Service"): "1035",
    ("kubeflow.org/v1", "PyTorchJob"): "1035",
    ("batch/v1", "Job"): "label",
    ("batch.volcano.sh/v1alpha1", "Job"): "label",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "label",
}
_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(parts: Iterable[Any]) -> str:
    """spec.tasks[0].template.metadata.labels["app.kubernetes.io/name"]"""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _SIMPLE_KEY.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f'["{part}"]'
    return out


def _qualified_key_problem(key: Any) -> str | None:
    if not isinstance(key, str) or not key:
        return "a key must be a non-empty string"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN_RE.match(prefix)):
        return f"key prefix {prefix!r} must be a DNS subdomain (lowercase, at most 253 characters)"
    if not name or len(name) > 63 or not LABEL_NAME_RE.match(name):
        return "a key name must be 1-63 characters: letters, digits, '-', '_', '.', starting and ending alphanumeric"
    return None


def _labels(labels: Any, where: list[Any]) -> Iterator[tuple[list[Any], str]]:
    if not isinstance(labels, dict):
        yield where, "expected a map of strings"
        return
    for key, value in labels.items():
        path = [*where, key]
        bad = _qualified_key_problem(key)
        if bad:
            yield path, f"invalid label key: {bad}"
        if not isinstance(value, str):
            yield path, f"a label value must be a string, got {type(value).__name__}"
        elif len(value) > 63 or not LABEL_NAME_RE.match(value):
            yield (
                path,
                "invalid label value: at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric",
            )


def _annotations(annotations: Any, where: list[Any]) -> Iterator[tuple[list[Any], str]]:
    if not isinstance(annotations, dict):
        yield where, "expected a map of strings"
        return
    size = 0
    for key, value in annotations.items():
        path = [*where, key]
        bad = _qualified_key_problem(key)
        if bad:
            yield path, f"invalid annotation key: {bad}"
        if not isinstance(value, str):
            yield path, f"an annotation value must be a string, got {type(value).__name__}"
        else:
            size += len(str(key)) + len(value.encode())
    if size > _MAX_ANNOTATIONS:
        yield where, f"annotations total {size} bytes; the API server allows {_MAX_ANNOTATIONS}"


def _metadata(obj: dict[str, Any], scope: str | None) -> Iterator[tuple[list[Any], str]]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        yield ["metadata"], "missing: every object needs metadata with a name"
        return
    for key in meta:
        if key in _SERVER_SET:
            yield ["metadata", key], "set by the API server; do not render it"
        elif key not in _META_ALLOWED:
            yield ["metadata", key], "unknown field: the API server would drop it without a word"
    name = meta.get("name")
    rule = _LABEL_NAMED.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if not isinstance(name, str) or not name:
        yield ["metadata", "name"], "missing: a GitOps object needs a fixed name (not generateName)"
    elif rule == "1035" and (len(name) > 63 or not DNS_1035_RE.match(name)):
        yield ["metadata", "name"], f"{name!r} must be a DNS-1035 label (a-z first, a-z 0-9 '-', at most 63)"
    elif rule == "label" and (len(name) > 63 or not DNS_LABEL_RE.match(name)):
        yield ["metadata", "name"], f"{name!r} must be a DNS-1123 label (a-z 0-9 '-', at most 63)"
    elif len(name) > 253 or not DNS_SUBDOMAIN_RE.match(name):
        yield ["metadata", "name"], f"{name!r} must be a DNS-1123 subdomain (a-z 0-9 '-' '.', at most 253)"
    namespace = meta.get("namespace")
    if namespace is not None:
        if scope == "Cluster":
            yield ["metadata", "namespace"], f"{obj.get('kind')} is cluster-scoped: remove the namespace"
        elif not isinstance(namespace, str) or len(namespace) > 63 or not DNS_LABEL_RE.match(namespace):
            yield ["metadata", "namespace"], f"{namespace!r} must be a DNS-1123 label"
    if "labels" in meta:
        yield from _labels(meta["labels"], ["metadata", "labels"])
    if "annotations" in meta:
        yield from _annotations(meta["annotations"], ["metadata", "annotations"])


def _templates(node: Any, where: list[Any]) -> Iterator[tuple[list[Any], str]]:
    """Labels and annotations of every nested `template.metadata`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "template" and isinstance(value, dict) and isinstance(value.get("metadata"), dict):
                meta = value["metadata"]
                if "labels" in meta:
                    yield from _labels(meta["labels"], [*where, key, "metadata", "labels"])
                if "annotations" in meta:
                    yield from _annotations(meta["annotations"], [*where, key, "metadata", "annotations"])
            yield from _templates(value, [*where, key])
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _templates(item, [*where, i])


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else type(value).__name__


def _message(error: Any) -> tuple[list[Any], str]:
    path = list(error.absolute_path)
    kind = error.validator
    if kind == CLOSED or kind == "x-kubernetes-list-type":
        return path, error.message
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return [*path, missing], "required field is missing"
    if kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        shown = repr(error.instance) if not isinstance(error.instance, (dict, list)) else _type_name(error.instance)
        return path, f"expected {expected}, got {_type_name(error.instance)} {shown}"[:200]
    if kind == "anyOf" and error.validator_value == [{"type": "integer"}, {"type": "string"}]:
        return path, f"expected an integer or a string, got {_type_name(error.instance)}"
    if kind == "enum":
        allowed = ", ".join(str(v) for v in error.validator_value)
        return path, f"{error.instance!r} is not one of: {allowed}"
    if kind == "pattern":
        return path, f"{error.instance!r} does not match {error.validator_value}"
    return path, error.message


def _schema_for(obj: dict[str, Any], crds_dir: Path | None) -> tuple[Any, str | None, str | None]:
    """(validator, scope, problem) for an object's apiVersion/kind."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        return None, None, "apiVersion and kind must be set"
    group, _, version = api_version.rpartition("/")
    ref = crd_index(crds_dir).get((group, kind))
    if ref is not None:
        facts, validator = crd_validator(ref, version)
        if validator is None:
            served = ", ".join(f"{group}/{v}" for v in facts.versions)
            return None, facts.scope, f"{ref.path.name} has no version {version} of {kind} (it has {served})"
        if not facts.served:
            return None, facts.scope, f"{api_version} {kind} is not served by {ref.path.name}"
        return validator, facts.scope, None
    validator = builtin_validator(api_version, kind, crds_dir)
    if validator is not None:
        return validator, SCOPES.get((api_version, kind)), None
    where = f"the CRDs in {crds_dir}" if crds_dir else "the vendored CRDs"
    return None, None, f"no schema for {api_version} {kind} in {where}: add its CRD to a --crds DIR"


def validate_objects(
    objects: Iterable[dict[str, Any]], *, crds_dir: Path | None = None, sources: Sequence[str] | None = None
) -> list[SchemaProblem]:
    """Every problem of every object, in object order and then by path.

    sources[i], when given, is the file objects[i] came from (it goes into the problems).
    """
    problems: list[SchemaProblem] = []
    for i, obj in enumerate(objects):
        source = sources[i] if sources is not None and i < len(sources) else ""
        if not isinstance(obj, dict):
            problems.append(SchemaProblem(source, "", "", "", "not an object"))
            continue
        kind = str(obj.get("kind", ""))
        meta = obj.get("metadata")
        name = str(meta.get("name", "")) if isinstance(meta, dict) else ""
        found: list[tuple[list[Any], str]] = []
        validator, scope, problem = _schema_for(obj, crds_dir)
        if problem:
            found.append(([], problem))
        if validator is not None:
            found += [_message(err) for err in validator.iter_errors(obj)]
        found += list(_metadata(obj, scope))
        found += list(_templates(obj.get("spec"), ["spec"]))
        seen: set[tuple[str, str]] = set()
        ordered = sorted(((format_path(path), message) for path, message in found), key=lambda pm: pm[0])
        for path, message in ordered:
            if (path, message) not in seen:
                seen.add((path, message))
                problems.append(SchemaProblem(source, kind, name, path, message))
    return problems
