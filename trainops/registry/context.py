"""Registries: how references are completed and which backend serves each registry root."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from trainops.registry.backends import open_backend
from trainops.registry.backends.base import Backend
from trainops.registry.reference import Reference, RegistryRoot, parse_reference, parse_registry

if TYPE_CHECKING:
    from trainops.spec import Manifest


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
    def for_manifest(cls, manifest: Manifest, *, insecure: bool = False) -> Registries:
        """Registries completing references with the manifest's spec.registry, relative paths
        from its directory, and its insecureRegistries."""
        spec = manifest.pipeline.spec
        return cls(
            default_registry=spec.registry,
            base_dir=manifest.root,
            insecure=insecure,
            insecure_registries=tuple(spec.insecure_registries),
        )

    def ref(self, text: str) -> Reference:
        return parse_reference(text, default_registry=self.default_registry, base_dir=self.base_dir)

    def root(self, text: str | None = None) -> RegistryRoot:
        """A registry root from a URL, or the default registry."""
        from trainops.errors import InputError

        url = text or self.default_registry
        if url is None:
            raise InputError(
                "no registry given", hint="pass a registry URL, or run where trainops.yaml sets spec.registry"
            )
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
