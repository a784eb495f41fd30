"""Registry backends, chosen by URL scheme: file:// (local), oci:// (Distribution API), s3://."""

from __future__ import annotations

import os

from trainops.registry.backends.base import Backend
from trainops.registry.reference import RegistryRoot

INSECURE_ENV = "TRAINOPS_INSECURE_REGISTRIES"


def insecure_hosts(extra: tuple[str, ...] | list[str] = ()) -> set[str]:
    """host[:port]s allowed over plain HTTP: TRAINOPS_INSECURE_REGISTRIES plus extra."""
    listed = {h.strip() for h in os.environ.get(INSECURE_ENV, "").split(",") if h.strip()}
    return listed | set(extra)


def is_loopback(host: str) -> bool:
    """localhost, 127.0.0.0/8 and [::1] (with or without a port): plain HTTP by default, as
    Docker treats them."""
    import ipaddress

    name = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def open_backend(root: RegistryRoot, *, insecure: bool = False, insecure_registries: tuple[str, ...] = ()) -> Backend:
    """The backend for a registry root. Heavy clients (requests, boto3) load only here."""
    if root.scheme == "file":
        from trainops.registry.backends.local import LocalBackend

        return LocalBackend(root)
    if root.scheme == "oci":
        from trainops.registry.backends.oci import OCIBackend

        plain = insecure or is_loopback(root.location) or root.location in insecure_hosts(insecure_registries)
        return OCIBackend(root, insecure=plain)
    from trainops.registry.backends.s3 import S3Backend

    return S3Backend(root)
