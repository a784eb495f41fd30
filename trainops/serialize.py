"""The one serialization home: every `-o json` document and every result trainops writes as
JSON goes through `to_data`, so keys are camelCase by construction.

Rules (the convention test checks the output, this module makes it so):
- a dataclass becomes an object whose keys are its field names in camelCase; a field declared
  with `dataclasses.field(metadata=HIDDEN)` stays out (a handle, a cause, text for people),
  one declared with `metadata=FLATTEN` has its own fields in the object instead of under
  its name (a result that extends another: `hub import` reports what `push` does, plus the
  Hub's facts), and the names in a class's `data_properties` (a ClassVar tuple) are added
  as computed fields, camelCase too (`same`, `ok`, `exitCode`);
- a pydantic model becomes its JSON form by alias (trainops' models use `to_camel` aliases);
- an object with a `to_data()` method is asked for it (a result that shapes itself, still
  through this module for its values);
- a mapping keeps its keys as they are: they are data (metric names, labels, annotations,
  file paths), never field names — a result with named fields is a dataclass, not a dict;
- datetimes are ISO 8601 UTC with `Z` (`trainops.clock.iso`), to the millisecond; so is a
  result's field that holds a time as text (an artifact's `created`, stamped to the second
  so its digest is reproducible, reads `…:12.000Z`): one precision in every document. A
  mapping's values are data and stay as written (an annotation says what the manifest
  says); paths are strings; enums their value; tuples, lists, sets (sorted) and frozensets become arrays.

Nothing heavy is imported here: the hot paths (`registry ls`, `ckpt latest`) use it without
loading pydantic; a pydantic model is recognised by its `model_dump` method.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import PurePath
from typing import Any

from trainops.clock import iso, one_precision

HIDDEN = {"data": False}
"""Metadata of a dataclass field that is not part of the result's JSON."""
FLATTEN = {"data": "flatten"}
"""Metadata of a dataclass field whose own fields are the result's (it extends that result)."""


def camel(name: str) -> str:
    """`bytes_freed` → `bytesFreed`; a name already in camelCase is returned as it is."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest if part)


def to_data(value: Any) -> Any:
    """`value` as plain JSON data (dict, list, str, int, float, bool, None)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "to_data") and callable(value.to_data):
        return to_data(value.to_data())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            how = field.metadata.get("data", True)
            if how == "flatten":
                out.update(to_data(getattr(value, field.name)))
            elif how:
                item = getattr(value, field.name)
                out[camel(field.name)] = one_precision(item) if isinstance(item, str) else to_data(item)
        for name in getattr(value, "data_properties", ()):
            out[camel(name)] = to_data(getattr(value, name))
        return out
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return {str(key): to_data(item) for key, item in value.items()}
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_data(value.value)
    if isinstance(value, (set, frozenset)):
        return [to_data(item) for item in sorted(value, key=str)]
    if isinstance(value, (list, tuple)):
        return [to_data(item) for item in value]
    raise TypeError(f"cannot serialize {type(value).__name__} as JSON: give it fields (a dataclass) or to_data()")


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """`value` as a JSON document (what `-o json` prints)."""
    return json.dumps(to_data(value), indent=indent, ensure_ascii=False)
