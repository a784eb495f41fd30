"""ModelPack layers that hold their file in a tar archive, as modctl packs each file.

modctl (v0.2.x) writes every file of a model as one layer: a tar archive of that file
(`application/vnd.cnai.model.weight.v1.tar`, …; `+gzip` and `+zstd` variants exist), its
path in `org.cnai.model.filepath`. trainops verifies the layer's blob as any other, then
takes the file out of the archive: exactly one regular file whose name is the layer's
path; anything else (links, devices, a second file, a name elsewhere) is refused as a
damaged or hostile layer, before anything reaches the destination. A safetensors file in
an uncompressed tar is read in place: its data starts after the tar's header blocks.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from trainops.errors import InputError, IntegrityError
from trainops.registry import media

HEAD = 16 * 1024  # enough for a tar's header blocks, long names (PAX, GNU) included


def _bad(where: str, problem: str) -> IntegrityError:
    return IntegrityError(f"{where}: {problem}", hint="the layer is damaged or hostile; nothing was written")


def _member(archive: tarfile.TarFile, relpath: str, where: str) -> tarfile.TarInfo:
    """The one regular file of the archive, named relpath (or its last part)."""
    found: tarfile.TarInfo | None = None
    for member in archive:
        if member.isdir():
            continue
        if not member.isfile():
            raise _bad(where, f"its tar holds {member.name!r}, which is not a regular file")
        if found is not None:
            raise _bad(where, f"its tar holds more than one file ({found.name!r}, {member.name!r})")
        found = member
    if found is None:
        raise _bad(where, "its tar holds no file")
    name = found.name.removeprefix("./")
    if name not in (relpath, relpath.rsplit("/", 1)[-1]):
        raise _bad(where, f"its tar holds {found.name!r}, not the layer's file {relpath!r}")
    return found


def unpack(blob: Path, out: Path, *, media_type: str, relpath: str, where: str) -> int:
    """Write the file a verified tar layer (blob) holds to out; its size."""
    packed = media.packing(media_type)
    if packed == "tar+zstd":
        raise InputError(
            f"{where}: its layer is a zstd-compressed tar ({media_type}), which trainops cannot unpack",
            hint="push the model with modctl's raw or uncompressed tar layers, or pull it with modctl",
        )
    try:
        with tarfile.open(blob, "r:gz") if packed == "tar+gzip" else tarfile.open(blob, "r:") as archive:
            member = _member(archive, relpath, where)
            source = archive.extractfile(member)
            assert source is not None  # a regular file
            with source, out.open("wb") as fh:
                shutil.copyfileobj(source, fh, 8 * 1024 * 1024)
    except (tarfile.TarError, OSError, EOFError) as err:
        out.unlink(missing_ok=True)
        raise _bad(where, f"its tar cannot be read ({err})") from None
    return member.size


def data_span(read_at: Callable[[int, int], bytes], relpath: str, where: str) -> tuple[int, int]:
    """(offset, size) of the file inside an uncompressed tar layer, from its first bytes."""
    head = read_at(0, HEAD)
    try:
        with tarfile.open(fileobj=io.BytesIO(head), mode="r:") as archive:
            member = archive.next()
    except (tarfile.TarError, EOFError) as err:
        raise _bad(where, f"its tar cannot be read ({err})") from None
    if member is None or not member.isfile():
        raise _bad(where, "its tar does not start with a regular file")
    return member.offset_data, member.size
