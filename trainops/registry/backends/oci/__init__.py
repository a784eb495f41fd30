"""oci:// backend: the OCI Distribution API (Distribution, Harbor, ECR, …).

- HTTP on the standard library (http: TLS unless the registry is marked insecure, CA
  bundles via REQUESTS_CA_BUNDLE/SSL_CERT_FILE, proxies from the environment).
- Credentials from Docker's config.json; Basic and Bearer (token per scope) challenges;
  5xx, 429 and dropped connections retried with backoff (session).
- Uploads stream the file (sendfile on plain HTTP); a dropped upload resumes from the
  offset the registry reports (upload).
- Downloads are hashed as they are written, large blobs as parallel ranges, resumed with
  Range, and verified (download).
- Referrers: the OCI 1.1 API where the registry has it, else the referrers tag schema
  (`sha256-<hex>` → an image index), which trainops maintains on put_manifest.
"""

from __future__ import annotations

import contextlib
import functools
import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from trainops.errors import IntegrityError, NotFoundError, RemoteError
from trainops.registry import media
from trainops.registry.backends.base import (
    Backend,
    BlobSource,
    Descriptor,
    ManifestData,
    Progress,
    no_progress,
    sha256_digest,
)
from trainops.registry.backends.oci.auth import HUB_API, is_docker_hub
from trainops.registry.backends.oci.session import ATTEMPTS, RegistrySession, pull_scope, push_scope
from trainops.registry.reference import DIGEST_RE, RegistryRoot
from trainops.retry import Backoff, RetryPolicy

if TYPE_CHECKING:
    from trainops.registry.backends.oci.download import Downloads
    from trainops.registry.backends.oci.upload import Uploads

ACCEPT = ", ".join(media.MANIFEST_TYPES)
_RACE = RetryPolicy(attempts=ATTEMPTS, base=0.1, jitter=1.0)  # writers that collided: spread them apart


class OCIBackend(Backend):
    scheme = "oci"

    def __init__(self, root: RegistryRoot, *, insecure: bool = False) -> None:
        super().__init__(root)
        self.host = root.location
        api = HUB_API if self.host.endswith("docker.io") and is_docker_hub(self.host) else self.host
        self.base = f"{'http' if insecure else 'https'}://{api}"
        self.insecure = insecure
        self.session = RegistrySession(self.host, self.base)
        # `?n=` of tags/list: None lets the registry choose (Distribution then answers every
        # tag at once, reading its tag directory once rather than once per page); a page it
        # cuts short is followed through its Link header either way.
        self.page_size: int | None = None
        self.catalog_page_size = 1000  # _catalog: Distribution's default page is only 100

    def close(self) -> None:
        self.session.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.session.request(method, path, **kwargs)

    _pull = staticmethod(pull_scope)
    _push = staticmethod(push_scope)

    @functools.cached_property
    def uploads(self) -> Uploads:  # imported when first needed: `registry ls` sends no blob
        from trainops.registry.backends.oci.upload import Uploads

        return Uploads(self.session)

    @functools.cached_property
    def downloads(self) -> Downloads:
        from trainops.registry.backends.oci.download import Downloads

        return Downloads(self.session)

    # -- blobs -----------------------------------------------------------------------------
    def blob_size(self, repo: str, digest: str) -> int | None:
        return self.session.blob_size(repo, digest)

    def upload_blob(self, repo: str, source: BlobSource, progress: Progress = no_progress) -> None:
        self.uploads.upload(repo, source, progress)

    def ingest_file(self, repo: str, path: Path, progress: Progress = no_progress) -> tuple[str, int, bool] | None:
        return self.uploads.ingest(repo, path, progress)

    def download_blob(self, repo: str, digest: str, dest: Path, progress: Progress = no_progress) -> None:
        self.downloads.download(repo, digest, dest, progress)

    def open_blob(self, repo: str, digest: str) -> AbstractContextManager[BinaryIO]:
        return self.downloads.open(repo, digest)

    def read_range(self, repo: str, digest: str, offset: int, length: int) -> bytes:
        return self.downloads.read_range(repo, digest, offset, length)

    def honours_ranges(self) -> bool:
        return not self.downloads.ranges_ignored

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        resp = self._request(
            "POST",
            f"/v2/{repo}/blobs/uploads/",
            scope=self._push(repo),
            ok=(201, 202),
            params={"mount": digest, "from": from_repo},
        )
        if resp.status_code == 201:
            return True
        location = resp.headers.get("Location")
        if location:
            with contextlib.suppress(RemoteError, NotFoundError):
                self._request("DELETE", location, scope=self._push(repo), ok=(204, 202, 200), missing_ok=True)
        return False

    def delete_blob(self, repo: str, digest: str) -> None:
        self._request("DELETE", f"/v2/{repo}/blobs/{digest}", scope=self._push(repo), ok=(202, 200), missing_ok=True)

    def list_blobs(self, repo: str) -> list[str] | None:
        return None  # the Distribution API cannot list blobs; the registry's own gc reclaims them

    # -- manifests and tags ------------------------------------------------------------
    def put_manifest(self, repo: str, manifest: ManifestData, tag: str | None = None) -> None:
        if sha256_digest(manifest.data) != manifest.digest:
            raise IntegrityError(f"manifest bytes do not match {manifest.digest}")
        headers = {"Content-Type": manifest.media_type}
        backoff = Backoff(f"PUT manifest {manifest.digest[:19]} to {self.host}/{repo}", policy=_RACE)
        while True:
            try:
                resp = self._request(
                    "PUT",
                    f"/v2/{repo}/manifests/{tag or manifest.digest}",
                    scope=self._push(repo),
                    ok=(201,),
                    headers=headers,
                    body=manifest.data,
                )
                break
            except IntegrityError:
                # Distribution answers DIGEST_INVALID when another writer stores the same
                # manifest bytes at the same moment (under another tag, say); the bytes were
                # checked above, so the PUT is sent again once that writer is done.
                if not backoff.wait("another writer stored the same manifest at that moment"):
                    raise
        parsed = json.loads(manifest.data)
        subject = parsed.get("subject")
        if subject and "OCI-Subject" not in resp.headers:
            self._add_referrer(repo, subject["digest"], manifest, parsed)

    def _referrers_tag(self, digest: str) -> str:
        return "sha256-" + digest.split(":", 1)[1]

    def _add_referrer(self, repo: str, subject: str, manifest: ManifestData, parsed: dict[str, Any]) -> None:
        """Maintain the referrers tag schema index for registries without the referrers API."""
        entry = Descriptor(
            media_type=manifest.media_type,
            digest=manifest.digest,
            size=len(manifest.data),
            annotations=dict(parsed.get("annotations") or {}),
            artifact_type=parsed.get("artifactType") or (parsed.get("config") or {}).get("mediaType"),
        ).as_oci()
        tag = self._referrers_tag(subject)
        for _ in range(5):
            try:
                current = json.loads(self.get_manifest(repo, tag).data)
            except NotFoundError:
                current = {"schemaVersion": 2, "mediaType": media.OCI_INDEX, "manifests": []}
            entries = [m for m in current.get("manifests", []) if m.get("digest") != manifest.digest]
            entries.append(entry)
            entries.sort(key=lambda m: m["digest"])
            body = json.dumps({**current, "manifests": entries}, sort_keys=True).encode()
            self._request(
                "PUT",
                f"/v2/{repo}/manifests/{tag}",
                scope=self._push(repo),
                ok=(201,),
                headers={"Content-Type": media.OCI_INDEX},
                body=body,
            )
            # another writer may have replaced the index meanwhile: check ours is in it
            stored = json.loads(self.get_manifest(repo, tag).data)
            if any(m.get("digest") == manifest.digest for m in stored.get("manifests", [])):
                return
        raise RemoteError(f"could not record the referrer {manifest.digest[:19]} on {self.host}/{repo}")

    def get_manifest(self, repo: str, reference: str) -> ManifestData:
        resp = self._request(
            "GET",
            f"/v2/{repo}/manifests/{reference}",
            scope=self._pull(repo),
            ok=(200,),
            headers={"Accept": ACCEPT},
        )
        data = resp.content
        digest = sha256_digest(data)
        if DIGEST_RE.match(reference) and digest != reference:
            raise IntegrityError(f"{self.host}/{repo}: manifest {reference} arrived with digest {digest}")
        claimed = resp.headers.get("Docker-Content-Digest")
        if claimed and claimed != digest:
            raise IntegrityError(f"{self.host}/{repo}:{reference}: registry says {claimed}, content hashes to {digest}")
        media_type = resp.headers.get("Content-Type", "").split(";")[0] or str(json.loads(data).get("mediaType", ""))
        return ManifestData(data=data, media_type=media_type, digest=digest)

    def _paged(self, path: str, key: str, scope: str, page_size: int | None) -> list[str]:
        items: list[str] = []
        url: str | None = path
        params: dict[str, str] | None = {"n": str(page_size)} if page_size else None
        while url:
            resp = self._request("GET", url, scope=scope, ok=(200,), params=params)
            items.extend(resp.json().get(key) or [])
            link = resp.headers.get("Link", "")
            url = link.split(";")[0].strip("<> ") if 'rel="next"' in link else None
            params = None  # the next link carries them
        return items

    def list_tags(self, repo: str) -> list[str]:
        try:
            tags = self._paged(f"/v2/{repo}/tags/list", "tags", self._pull(repo), self.page_size)
        except NotFoundError:
            raise NotFoundError(
                f"no repository {repo} on {self.host}", hint="check the reference, or push to it first"
            ) from None
        return sorted(t for t in tags if not _is_referrers_tag(t))

    def _resolve_digest(self, repo: str, tag: str) -> str | None:
        resp = self._request(
            "HEAD",
            f"/v2/{repo}/manifests/{tag}",
            scope=self._pull(repo),
            ok=(200,),
            headers={"Accept": ACCEPT},
            missing_ok=True,
        )
        return None if resp.status_code == 404 else resp.headers.get("Docker-Content-Digest")

    def delete_tag(self, repo: str, tag: str) -> None:
        """Remove a tag. OCI registries do it with DELETE by tag; Distribution 2.8 cannot
        (it answers DIGEST_INVALID), so there the manifest itself is deleted — refused when
        another tag still names it, since that would remove the other tag too."""
        digest = self._resolve_digest(repo, tag)
        if digest is None:
            raise NotFoundError(f"no tag {tag!r} in {self.host}/{repo}")
        try:
            self._request("DELETE", f"/v2/{repo}/manifests/{tag}", scope=self._push(repo), ok=(202, 200))
            return
        except (RemoteError, IntegrityError):
            pass  # no tag deletion here: fall back to deleting the manifest
        others = [t for t in self.list_tags(repo) if t != tag and self._resolve_digest(repo, t) == digest]
        if others:
            raise RemoteError(
                f"{self.host} cannot remove tag {tag!r} alone: it deletes manifests, "
                f"and {others[0]!r} names the same one",
                hint="remove the other tags too, or leave this one",
            )
        self.delete_manifest(repo, digest)

    def delete_manifest(self, repo: str, digest: str) -> None:
        self._request("DELETE", f"/v2/{repo}/manifests/{digest}", scope=self._push(repo), ok=(202, 200))

    def list_manifests(self, repo: str) -> list[str]:
        digests: set[str] = set()
        for tag in self._paged(f"/v2/{repo}/tags/list", "tags", self._pull(repo), self.page_size):
            found = self._resolve_digest(repo, tag)
            if not found:
                continue
            if _is_referrers_tag(tag):
                index = json.loads(self.get_manifest(repo, tag).data)
                digests.update(m["digest"] for m in index.get("manifests", []))
            else:
                digests.add(found)
        return sorted(digests)

    def list_repositories(self) -> list[str]:
        repos = self._paged("/v2/_catalog", "repositories", "registry:catalog:*", self.catalog_page_size)
        prefix = self.root.prefix.strip("/")
        return sorted(r for r in repos if not prefix or r == prefix or r.startswith(prefix + "/"))

    def referrers(self, repo: str, digest: str) -> list[Descriptor]:
        resp = self._request(
            "GET",
            f"/v2/{repo}/referrers/{digest}",
            scope=self._pull(repo),
            ok=(200,),
            missing_ok=True,
            headers={"Accept": media.OCI_INDEX},
        )
        if resp.status_code == 200 and resp.headers.get("Content-Type", "").startswith(media.OCI_INDEX):
            entries = resp.json().get("manifests", [])
        else:
            try:
                entries = json.loads(self.get_manifest(repo, self._referrers_tag(digest)).data).get("manifests", [])
            except NotFoundError:
                entries = []
        unique = {e["digest"]: Descriptor.from_oci(e) for e in entries}
        return [unique[k] for k in sorted(unique)]


def _is_referrers_tag(tag: str) -> bool:
    return tag.startswith("sha256-") and len(tag) == 71
