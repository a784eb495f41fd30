"""Small record artifacts — a signature or provenance bundle, an incident, a run's timeline,
an eval report — hold their content in one small file: `record_file` reads it, size-capped
and digest-checked, the one way each of them is read."""

from __future__ import annotations

from trainops.errors import IntegrityError
from trainops.registry.context import Registries
from trainops.registry.store import Resolved, bytes_source
from trainops.units import format_size


def record_file(
    registries: Registries, *, found: Resolved, what: str, limit: int, media_type: str | None = None
) -> bytes:
    """The content of `found`'s one file (the one layer of `media_type`, when given), at most
    `limit` bytes; IntegrityError names `what` it should have been otherwise."""
    layers = [layer for layer in found.parsed.layers if media_type is None or layer.media_type == media_type]
    if len(layers) != 1 or layers[0].size > limit:
        raise IntegrityError(f"{found.ref}: {what} has exactly one file of at most {format_size(limit)}")
    with registries.backend(found.ref).open_blob(found.ref.repository, layers[0].digest) as fh:
        data = fh.read(limit + 1)
    if bytes_source(data).digest != layers[0].digest:
        raise IntegrityError(f"{found.ref}: the file of {what} does not match its digest {layers[0].digest}")
    return data
