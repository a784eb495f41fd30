"""Registries: how references are completed and which backend serves each registry root."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from trainops.errors import NotFoundError
from trainops.projectdir import find_manifest, no_manifest
from trainops.registry.backends import open_backend
from trainops.registry.backends.base import Backend
from trainops.registry.reference import Reference, RegistryRoot, parse_reference, parse_registry

if TYPE_CHECKING:
    from trainops.manifest import Manifest


class ProgressSink(Protocol):
    """Where transfers report progress (the CLI passes rich bars; the library prints nothing)."""

    def add(self, name: str, total: int) -> Callable[[int], None]: ...


class NullProgress:
    def add(self, name: str, total: int) -> Callable[[int], None]:
        return lambda _n: None


@dataclass
class Registries:
    """Reference parsing with a default registry, and one backend per registry root."""

    default_registry: str | None = None
    base_dir: Path | None = None
    insecure: bool = False
    insecure_registries: tuple[str, ...] = ()
    _backends: dict[RegistryRoot, Backend] = field(default_factory=dict)

    @classmethod
    def for_manifest(cls, manifest: Manifest | None, *, insecure: bool = False) -> Registries:
        """Registries completing references with the manifest's spec.registry, relative paths
        from its directory, and its insecureRegistries (with no manifest: full references only)."""
        if manifest is None:
            return cls(insecure=insecure)
        spec = manifest.pipeline.spec
        return cls(
            default_registry=spec.registry,
            base_dir=manifest.root,
            insecure=insecure,
            insecure_registries=tuple(spec.insecure_registries),
        )

    def ref(self, text: str) -> Reference:
        return parse_reference(text, default_registry=self.default_registry, base_dir=self.base_dir)

    def tag_ref(self, text: str, *, beside: Reference) -> Reference:
        """A destination that must carry a tag (`registry tag SRC DST`): REPO:TAG, or a bare
        TAG in beside's repository, as `crane tag` takes it."""

        if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", text):
            return beside.with_digest(None).with_tag(text)
        return self.ref(text)

    def root(self, text: str | None = None) -> RegistryRoot:
        """A registry root from a URL, or the default registry."""
        url = text or self.default_registry
        if url is None:
            raise NotFoundError(f"no registry given, and {no_manifest()}", hint="pass a registry URL, or -f FILE")
        return parse_registry(url, base_dir=self.base_dir)

    def backend(self, where: Reference | RegistryRoot) -> Backend:
        root = where.root if isinstance(where, Reference) else RegistryRoot(where.scheme, where.location)
        if root not in self._backends:
            self._backends[root] = open_backend(
                root if root.scheme != "file" else RegistryRoot("file", "", "/"),
                insecure=self.insecure,
                insecure_registries=self.insecure_registries,
            )
        return self._backends[root]

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()

    def __enter__(self) -> Registries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Opened:
    """What a command that may read trainops.yaml works with: the manifest (None when there
    is none) and the registries built from it. A context manager that closes them."""

    manifest: Manifest | None
    registries: Registries

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, *exc: object) -> None:
        self.registries.close()


def open_registries(*, file: str | None, env: str | None = None, insecure: bool = False) -> Opened:
    """The manifest FILE (else the nearest trainops.yaml, here or in a parent directory; else
    none) and its registries. --env with no manifest to apply it to is a missing manifest."""

    path = Path(file) if file else find_manifest()
    manifest = None
    if path is None and env is not None:
        raise NotFoundError(f"--env {env} needs a manifest: {no_manifest()}", hint="pass -f FILE")
    if path is not None:
        from trainops.manifest import load_manifest  # lazy: loads pydantic

        manifest = load_manifest(path, env=env)
    return Opened(manifest, Registries.for_manifest(manifest, insecure=insecure))
