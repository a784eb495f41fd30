"""References: `[scheme://host[:port]/]repo[:tag][@sha256:…]`, and registry roots.

For every scheme the path names the repository:

    oci://host:5000/team/model:v1     repository team/model on registry host:5000
    s3://bucket/team/model:v1         repository team/model in bucket
    file:///srv/registry/team/model:v1  the OCI image layout directory /srv/registry/team/model

A reference without a scheme is completed by the default registry (the manifest's
`spec.registry`): with `oci://harbor.example.com/llm`, `tiny/ckpt:v1` means
`oci://harbor.example.com/llm/tiny/ckpt:v1`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from trainops.errors import InputError, UsageError

Scheme = Literal["file", "oci", "s3"]
SCHEMES: tuple[Scheme, ...] = ("file", "oci", "s3")

_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?$")
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")

FORM = "expected [file|oci|s3://HOST/]REPO[:TAG][@sha256:DIGEST]"
NAME_RULE = "lowercase a-z 0-9 components joined by . _ __ or -, separated by / (the OCI Distribution rule)"
_COMPONENT_RE = re.compile(rf"^{_COMPONENT}$")


def _bad(text: str, why: str) -> InputError:
    return InputError(f"{text!r} is not a valid reference: {why}", hint=FORM)


@dataclass(frozen=True)
class RegistryRoot:
    """Where repositories live: a scheme and a location (host, bucket, or nothing for file)."""

    scheme: Scheme
    location: str  # oci: host[:port]; s3: bucket; file: ""
    prefix: str = ""  # oci namespace, s3 key prefix, or the file:// directory

    @property
    def url(self) -> str:
        if self.scheme == "file":
            return f"file://{self.prefix}"
        return f"{self.scheme}://{self.location}" + (f"/{self.prefix}" if self.prefix else "")


@dataclass(frozen=True)
class Reference:
    """A repository in a registry, optionally narrowed to a tag and/or a digest."""

    scheme: Scheme
    location: str
    repository: str  # oci/s3: the path in the registry; file: the layout directory (absolute)
    tag: str | None = None
    digest: str | None = None

    @property
    def root(self) -> RegistryRoot:
        return RegistryRoot(self.scheme, self.location)

    @property
    def repo_url(self) -> str:
        if self.scheme == "file":
            return f"file://{self.repository}"
        return f"{self.scheme}://{self.location}/{self.repository}"

    @property
    def target(self) -> str | None:
        """What to resolve in the repository: the digest if pinned, else the tag."""
        return self.digest or self.tag

    def with_tag(self, tag: str | None) -> Reference:
        return replace(self, tag=tag)

    def with_digest(self, digest: str | None) -> Reference:
        return replace(self, digest=digest)

    def to_data(self) -> str:
        """A reference in JSON is its text (`trainops.serialize`)."""
        return str(self)

    def __str__(self) -> str:
        text = self.repo_url
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def _split_tag_digest(text: str, rest: str) -> tuple[str, str | None, str | None]:
    digest = None
    if "@" in rest:
        rest, digest = rest.rsplit("@", 1)
        if not DIGEST_RE.match(digest):
            raise _bad(text, f"{digest!r} is not a sha256 digest (sha256: and 64 lowercase hex digits)")
    tag = None
    head, slash, last = rest.rpartition("/")
    if ":" in last:
        last, tag = last.split(":", 1)
        if not TAG_RE.match(tag):
            raise _bad(text, f"tag {tag!r} must match [A-Za-z0-9_][A-Za-z0-9._-]{{0,127}}")
    return head + slash + last, tag, digest


def _registry_parts(text: str, scheme_text: str, rest: str) -> tuple[Scheme, str, str]:
    scheme: Scheme
    if scheme_text == "oci":
        scheme = "oci"
    elif scheme_text == "s3":
        scheme = "s3"
    elif scheme_text == "file":
        scheme = "file"
    else:
        raise _bad(text, f"unknown scheme {scheme_text!r}; use file://, oci:// or s3://")
    if scheme == "file":
        return "file", "", rest
    location, _, path = rest.partition("/")
    if scheme == "oci" and not _HOST_RE.match(location):
        raise _bad(text, f"{location!r} is not a registry host[:port]")
    if scheme == "s3" and not _BUCKET_RE.match(location):
        raise _bad(text, f"{location!r} is not an S3 bucket name")
    return scheme, location, path.strip("/")


def _file_dir(text: str, path: str, base_dir: Path | None) -> str:
    if not path:
        raise _bad(text, "file:// needs a directory path")
    full = Path(path) if os.path.isabs(path) else (base_dir or Path.cwd()) / path
    return os.path.normpath(str(full.absolute()))


def parse_registry(url: str, *, base_dir: Path | None = None) -> RegistryRoot:
    """A registry URL (`spec.registry`, or the argument of `registry ls`)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InputError(
            f"{url!r} is not a registry URL", hint="use file://PATH, oci://HOST/NAMESPACE or s3://BUCKET/PREFIX"
        )
    scheme_, location, path = _registry_parts(url, scheme, rest)
    if scheme_ == "file":
        return RegistryRoot("file", "", _file_dir(url, path, base_dir))
    if path and not REPO_RE.match(path):
        raise InputError(f"{url!r}: namespace {path!r} must be lowercase path components")
    return RegistryRoot(scheme_, location, path)


def parse_reference(text: str, *, default_registry: str | None = None, base_dir: Path | None = None) -> Reference:
    """Parse a reference; one without a scheme is completed by default_registry.

    One repository-name rule for every scheme, OCI Distribution's: the repository path of
    oci:// and s3://, the part a default registry completes, and the last directory of a
    file:// path (the name it keeps when copied to a registry) are lowercase components.
    """
    text = text.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        if default_registry is None:
            raise UsageError(
                f"{text!r} names no registry",
                hint="write oci://HOST/REPO:TAG (or s3://, file://), or run where trainops.yaml is (or pass -f FILE)",
            )
        repo, _, _ = _split_tag_digest(text, text)
        if not REPO_RE.match(repo.strip("/")):
            raise _bad(text, f"repository {repo!r} must be {NAME_RULE}")
        return parse_reference(f"{default_registry.rstrip('/')}/{text}", base_dir=base_dir)
    path, tag, digest = _split_tag_digest(text, rest)
    scheme_, location, repo = _registry_parts(text, scheme, path)
    if scheme_ == "file":
        directory = _file_dir(text, repo, base_dir)
        name = os.path.basename(directory)
        if not _COMPONENT_RE.match(name):
            raise _bad(text, f"repository name {name!r} must be {NAME_RULE}")
        return Reference("file", "", directory, tag, digest)
    if not repo:
        raise _bad(text, "it names no repository")
    if not REPO_RE.match(repo):
        raise _bad(text, f"repository {repo!r} must be {NAME_RULE}")
    if scheme_ == "oci" and location.endswith("docker.io"):
        location, repo = _docker_hub(location, repo)
    return Reference(scheme_, location, repo, tag, digest)


def _docker_hub(location: str, repo: str) -> tuple[str, str]:
    """Docker Hub names as Docker reads them: docker-py resolves the index name
    (index.docker.io is docker.io), and a one-component name is an official image
    (`ubuntu` is `library/ubuntu`)."""
    from docker.auth import INDEX_NAME, resolve_repository_name  # lazy: loads docker

    index, remote = resolve_repository_name(f"{location}/{repo}")
    if index != INDEX_NAME:
        return location, repo
    return index, remote if "/" in remote else f"library/{remote}"
