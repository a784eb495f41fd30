"""Stage keys: what decides a stage's output, as one sha256.

A stage's key is the sha256 of canonical JSON of its resolved configuration (the
manifest section it reads, after the environment overlay) and the digests of its inputs
(the source tree, the image or the environment the code ran in, the checkpoint, the eval
report, the release). Same key, same output: a stage whose key already has an output in
the registry is not run again (trainops.pipeline.cache).

The source tree's digest reuses the image builder's context selection and the digest
cache (trainops.image.context), so a warm tree of 10,000 files costs a stat per file.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainops.manifest import Manifest
from trainops.registry.artifact import canonical_json
from trainops.registry.backends.base import sha256_digest
from trainops.registry.lineage_data import Environment

KEY_VERSION = 1


def stage_key(*, stage: str, config: Any, inputs: Mapping[str, str]) -> str:
    """sha256 of {version, stage, config, inputs} as canonical JSON."""
    doc = {"version": KEY_VERSION, "stage": stage, "config": config, "inputs": dict(sorted(inputs.items()))}
    return sha256_digest(canonical_json(doc))


def key_hex(key: str) -> str:
    return key.split(":", 1)[1]


@dataclass(frozen=True)
class SourceDigest:
    """The digest of the files a stage's code comes from, and how many there are."""

    digest: str
    files: list[str]
    root: str


DEFAULT_SOURCE_EXCLUDE = [".trainops/**", ".git/**", "**/__pycache__/**", "**/*.pyc"]


def source_digest(*, manifest: Manifest) -> SourceDigest:
    """The image context (image.context, include, exclude; the manifest itself left out),
    else the manifest's directory without trainops' and git's own files and Python's bytecode
    caches (a trainer importing the project writes them, which must not change the key):
    paths, modes and sha256 of every file."""
    from trainops.image.context import hash_entries, select_context  # lazy: loads tarfile

    image = manifest.pipeline.spec.image
    root = manifest.local_path(image.context) if image is not None else manifest.root
    include = image.include if image is not None else []
    exclude = image.exclude if image is not None else DEFAULT_SOURCE_EXCLUDE
    selection = hash_entries(select_context(root, include=include, exclude=exclude, manifest=manifest.path))
    identities = [entry.identity() for entry in selection.entries]
    return SourceDigest(
        digest=sha256_digest(canonical_json(identities)),
        files=[entry.relpath for entry in selection.entries],
        root=str(root),
    )


def installed_packages() -> list[str]:
    """Every distribution on sys.path as name==version, from the names of its
    `.dist-info`/`.egg-info` directories (one directory listing per path entry, no file reads)."""
    found: set[str] = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            stem, dot, ext = name.rpartition(".")
            if dot and ext in ("dist-info", "egg-info") and "-" in stem:
                dist, _, version = stem.partition("-")
                found.add(f"{dist.lower().replace('_', '-')}=={version.split('-')[0]}")
    return sorted(found)


def run_environment() -> Environment:
    """This interpreter and the distributions installed in it."""
    names = installed_packages()
    python = ".".join(str(part) for part in sys.version_info[:3])
    implementation = sys.implementation.name
    machine = f"{sys.platform}-{platform.machine()}"
    doc = {"python": python, "implementation": implementation, "platform": machine, "packages": names}
    return Environment(
        python=python,
        implementation=implementation,
        platform=machine,
        packages=len(names),
        digest=sha256_digest(canonical_json(doc)),
    )


def section(model: Any) -> Any:
    """A manifest section as plain data for a key (camelCase, defaults included)."""
    if model is None:
        return None
    return model.model_dump(by_alias=True, mode="json")
