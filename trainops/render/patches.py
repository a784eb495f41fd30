"""spec.patches: RFC 7386 JSON merge patches on rendered objects, applied last.

A patch applies to every object whose kind (and name, when the patch gives one) matches.
Merge patch semantics: mappings merge key by key, null removes a key, anything else —
lists included — replaces. A patch that matches no rendered object is an error: it is
almost always a typo, or a leftover from another scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainops.errors import InputError
from trainops.manifest.pipeline import Patch


def plain(value: Any) -> Any:
    """A manifest value as plain dicts, lists and scalars (the loader's own types carry positions)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    for kind in (int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: the result of applying `patch` to `target` (neither is modified)."""
    if not isinstance(patch, dict):
        return plain(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _matches(obj: dict[str, Any], patch: Patch) -> bool:
    if obj.get("kind") != patch.target.kind:
        return False
    return patch.target.name is None or obj.get("metadata", {}).get("name") == patch.target.name


def apply_patches(
    objects: list[dict[str, Any]], patches: Sequence[tuple[int, Patch]], *, skip_kinds: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """Apply (index, patch) pairs in order; a patch matching nothing is an error naming its index.

    skip_kinds: kinds rendered elsewhere (the other half of render_all), whose patches are not
    this call's to match.
    """
    out = list(objects)
    for index, patch in patches:
        hits = [i for i, obj in enumerate(out) if _matches(obj, patch)]
        if not hits:
            if patch.target.kind in skip_kinds:
                continue
            kinds = sorted({str(o.get("kind")) for o in out})
            named = f" named {patch.target.name}" if patch.target.name else ""
            raise InputError(
                f"spec.patches[{index}]: no rendered {patch.target.kind}{named} to patch",
                hint=f"rendered kinds: {', '.join(kinds)}" if kinds else "nothing is rendered for this scheduler",
            )
        for i in hits:
            out[i] = merge_patch(out[i], patch.merge)
    return out
