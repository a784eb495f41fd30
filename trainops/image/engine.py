"""The docker builder's engine: any Docker Engine API at DOCKER_HOST (Docker, or Podman's API service).

The build goes through the low-level API (`POST /build`) rather than the SDK's
`images.build`, because the SDK cannot pass Podman's `secrets` and `timestamp`
parameters. The context tar is streamed to the engine as it is written (chunked
transfer), so a large context needs no temporary copy and a secret never touches the
client's disk.

Secrets: Podman's compat build endpoint accepts `secrets=["id=ID,src=FILE"]`, FILE being
a path inside the uploaded context that the server moves out of the context before the
build starts (so no COPY can see it) and deletes afterwards. trainops sends each secret
as such a file with a random name. Docker's build endpoint has no such parameter (its
BuildKit secrets travel over a session the plain API cannot open), so a build that uses
secrets is refused on Docker.
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from trainops.errors import NotFoundError, RemoteError
from trainops.image.context import Member, write_tar

Log = Callable[[str], None]
STREAM_CHUNK = 1024 * 1024
_PUSHED_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")


def _engine_hint() -> str:
    return (
        "start an engine that speaks the Docker API and point DOCKER_HOST at it "
        "(Podman: `podman system service --time=0 unix:///run/podman/podman.sock` and "
        "DOCKER_HOST=unix:///run/podman/podman.sock), or use the layer builder (--builder layer)"
    )


@dataclass
class Engine:
    api: Any  # docker.APIClient
    kind: str  # "podman" or "docker"
    version: str
    host: str

    @classmethod
    def connect(cls, timeout: int = 3600) -> Engine:
        import docker  # lazy: loads docker

        host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        try:
            client = docker.from_env(timeout=timeout)
            info = client.api.version()
        except docker.errors.DockerException as err:
            raise RemoteError(f"no container engine answers at {host} ({_short(err)})", hint=_engine_hint()) from None
        except Exception as err:  # requests' connection errors
            raise RemoteError(f"no container engine answers at {host} ({_short(err)})", hint=_engine_hint()) from None
        names = " ".join(str(c.get("Name", "")) for c in info.get("Components") or [])
        kind = "podman" if "podman" in names.lower() else "docker"
        return cls(api=client.api, kind=kind, version=str(info.get("Version", "")), host=host)

    def close(self) -> None:
        self.api.close()

    # -- images ------------------------------------------------------------------------
    def image_id(self, name: str) -> str | None:
        import docker  # lazy: loads docker

        try:
            return str(self.api.inspect_image(name)["Id"])
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as err:
            if getattr(err, "status_code", None) == 404:
                return None
            raise RemoteError(f"the engine could not inspect {name}: {_short(err)}") from None

    def ensure_image(self, name: str, log: Log) -> str:
        """The image id of name, pulling it when the engine does not have it."""
        found = self.image_id(name)
        if found:
            return found
        import docker  # lazy: loads docker

        log(f"pulling {name}\n")
        try:
            for item in self.api.pull(name, stream=True, decode=True):
                if item.get("error"):
                    raise docker.errors.APIError(str(item["error"]))
        except docker.errors.APIError as err:
            raise NotFoundError(
                f"base image {name} is not in the engine and could not be pulled ({_short(err)})",
                hint="build or load it into the engine first, or set image.base to an image it can pull",
            ) from None
        found = self.image_id(name)
        if not found:
            raise NotFoundError(f"base image {name} is not in the engine after pulling it")
        return found

    def tag(self, image: str, repository: str, tag: str) -> None:
        import docker  # lazy: loads docker

        try:
            self.api.tag(image, repository, tag=tag)
        except docker.errors.APIError as err:
            raise RemoteError(f"the engine could not tag {repository}:{tag}: {_short(err)}") from None

    def build(
        self,
        members: Sequence[Member],
        *,
        tags: list[str],
        labels: dict[str, str],
        build_args: dict[str, str],
        platform: str,
        secrets: list[str],
        timestamp: int | None,
        log: Log,
    ) -> str:
        """Build from a streamed context; return the image id. Build failures are RemoteErrors."""
        params: dict[str, Any] = {
            "t": tags,
            "dockerfile": "Dockerfile",
            "rm": "1",
            "forcerm": "1",
            "labels": json.dumps(labels, sort_keys=True),
            "buildargs": json.dumps(build_args, sort_keys=True),
            "platform": platform,
        }
        if self.kind == "podman":
            if secrets:
                params["secrets"] = json.dumps(secrets)
            if timestamp is not None:
                params["timestamp"] = str(timestamp)
        url = f"{self.api.base_url}/v{self.api.api_version}/build"
        body = _TarStream(members)
        try:
            response = self.api.post(
                url,
                params=params,
                data=iter(body),
                headers={"Content-Type": "application/x-tar"},
                stream=True,
                timeout=None,
            )
        except Exception as err:
            body.raise_error()
            raise RemoteError(f"the engine at {self.host} failed during the build request: {_short(err)}") from None
        body.raise_error()
        with response:
            if response.status_code >= 400:
                raise RemoteError(f"the engine refused the build (HTTP {response.status_code}): {response.text[:500]}")
            return self._follow_build(response, log)

    def _follow_build(self, response: Any, log: Log) -> str:
        image_id = ""
        tail: list[str] = []
        for raw in response.iter_lines():
            if not raw:
                continue
            try:
                item = json.loads(raw)
            except ValueError:
                item = {"stream": raw.decode("utf-8", "replace") + "\n"}
            if item.get("error") or item.get("errorDetail"):
                message = str(item.get("error") or (item.get("errorDetail") or {}).get("message") or item)
                last = "".join(tail[-5:]).strip().replace("\n", " | ")
                raise RemoteError(
                    f"the image build failed: {message.strip()}" + (f" (last output: {last})" if last else ""),
                    hint="fix the step above (see the build log), then build again",
                )
            text = item.get("stream")
            if text:
                tail.append(str(text))
                log(str(text))
            aux = item.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = str(aux["ID"])
        if not image_id:
            found = re.findall(r"Successfully built ([0-9a-f]{12,64})", "".join(tail))
            if found:
                image_id = self.image_id(found[-1]) or ""
        if not image_id:
            raise RemoteError("the engine finished the build without naming the image it built")
        return image_id

    def push(self, repository: str, tag: str, log: Log) -> str:
        """Push repository:tag; return the manifest digest the registry holds."""
        import docker  # lazy: loads docker

        digest = ""
        try:
            stream = self.api.push(repository, tag=tag, stream=True, decode=True)
            for item in stream:
                if item.get("error") or item.get("errorDetail"):
                    message = str(item.get("error") or item.get("errorDetail"))
                    raise RemoteError(f"the engine could not push {repository}:{tag}: {message.strip()}")
                status = str(item.get("status") or "")
                if status and "Pushing" not in status:
                    log(status + "\n")
                aux = item.get("aux")
                if isinstance(aux, dict) and aux.get("Digest"):
                    digest = str(aux["Digest"])
                found = _PUSHED_DIGEST.search(status)
                if found and not digest:
                    digest = found.group(1)
        except docker.errors.APIError as err:
            raise RemoteError(f"the engine could not push {repository}:{tag}: {_short(err)}") from None
        if not digest:
            raise RemoteError(f"the engine pushed {repository}:{tag} but reported no digest")
        return digest

    def export(self, name: str) -> Iterator[bytes]:
        """The image as a docker-archive tar stream (`docker save`)."""
        import docker  # lazy: loads docker

        try:
            chunks: Iterator[bytes] = self.api.get_image(name, chunk_size=STREAM_CHUNK)
            return chunks
        except docker.errors.APIError as err:
            raise RemoteError(f"the engine could not export {name}: {_short(err)}") from None


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


class _TarStream:
    """A context tar written on a thread and read as chunks, for a chunked HTTP body.

    The writer stops if the reader goes away (the request failed), and an error of the
    writer (a file changed while it was read) is re-raised to the caller.
    """

    def __init__(self, members: Sequence[Member]) -> None:
        self.members = members
        self.queue: queue.Queue[bytes | None] = queue.Queue(maxsize=16)
        self.cancelled = threading.Event()
        self.error: BaseException | None = None

    def _run(self) -> None:
        buffer = _Buffered(self)
        try:
            write_tar(self.members, buffer)  # type: ignore[arg-type]
            buffer.flush()
        except BaseException as err:  # handed to the reading thread
            self.error = err
        finally:
            self._put(None)

    def _put(self, item: bytes | None) -> None:
        while not self.cancelled.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue
        if item is not None:
            raise _Cancelled()

    def __iter__(self) -> Iterator[bytes]:
        thread = threading.Thread(target=self._run, name="trainops-context-tar", daemon=True)
        thread.start()
        try:
            while True:
                chunk = self.queue.get()
                if chunk is None:
                    break
                yield chunk
        finally:
            self.cancelled.set()
            thread.join(timeout=10)
        if self.error is not None and not isinstance(self.error, _Cancelled):
            raise self.error

    def raise_error(self) -> None:
        if self.error is not None and not isinstance(self.error, _Cancelled):
            raise self.error


class _Cancelled(Exception):
    pass


class _Buffered:
    def __init__(self, stream: _TarStream) -> None:
        self.stream = stream
        self.buf = bytearray()

    def write(self, data: bytes) -> int:
        self.buf += data
        if len(self.buf) >= STREAM_CHUNK:
            self.flush()
        return len(data)

    def flush(self) -> None:
        if self.buf:
            self.stream._put(bytes(self.buf))
            self.buf.clear()
