"""The API server, read with the user's kubeconfig: one small REST client over lightkube's config.

`connect(access)` loads the kubeconfig of a `ClusterAccess` (trainops.cluster.access: the file given, else the
first file of `$KUBECONFIG`, else ~/.kube/config; the current context unless one is named)
with lightkube (client certificates, tokens, token files, exec plugins, the cluster's CA;
HTTPS_PROXY/NO_PROXY honoured as kubectl does) and returns a `Cluster`: REST calls by
apiVersion/kind through the API server's discovery, so any installed CRD is read the same
way as a built-in kind.

Every way of not getting an answer becomes one `RemoteError` line (exit 6) that says which:
the server does not answer, TLS failed, 401 (the credentials are refused), 403 (the user may
not do it). Transient failures (a dropped connection, 429, 5xx) are retried through
trainops.retry. A refusal of an object (4xx on an apply) is an `ObjectRefused`, carrying the
server's message and the fields it names (`details.causes`).

Writes: `apply` exists for server-side dry runs (`dryRun=All`, what `validate --kubeconfig`
asks) and for the test-side stand-in of Argo CD (`trainops.cluster.applier`); trainops'
commands write only through git, with one documented exception: `merge_patch`, through which
trainops.cluster.nodes cordons and taints a node that failed a training run.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.cluster.access import ClusterAccess
from trainops.cluster.installs import install_hint
from trainops.errors import InputError, NotFoundError, RemoteError
from trainops.retry import RETRY_STATUS, Backoff, RetryPolicy, retry_after_seconds

FIELD_MANAGER = "trainops"
_POLICY = RetryPolicy(attempts=4, cap=2.0)


@dataclass(frozen=True)
class ResourceInfo:
    """How the API server serves one apiVersion/kind."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool


@dataclass(frozen=True)
class Cause:
    """One field the API server names in a refusal (`details.causes`)."""

    field: str
    message: str


class ObjectRefused(InputError):
    """The API server refused an object (4xx on apply): its own message, and the fields it names."""

    def __init__(self, message: str, *, status: int, reason: str, causes: list[Cause] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.causes = causes or []


def _load_config(access: ClusterAccess) -> Any:
    from lightkube.config.kubeconfig import KubeConfig  # lazy: loads lightkube
    from lightkube.core.exceptions import ConfigError  # lazy: loads lightkube

    path, context = access.path, access.context
    if not path.is_file():
        raise NotFoundError(
            f"no kubeconfig at {path} (from {access.found})",
            hint="pass --kubeconfig FILE or set KUBECONFIG to your cluster's kubeconfig",
        )
    try:
        config = KubeConfig.from_file(path).get(context_name=context)
    except ConfigError as err:
        raise InputError(
            f"kubeconfig {path}: {err}", hint="name one of its contexts (kubectl config get-contexts)"
        ) from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise InputError(f"kubeconfig {path} is not a kubeconfig ({type(err).__name__}: {err})") from None
    if config is None or config.user is None:
        raise InputError(f"kubeconfig {path}: context {context or '(current)'} has no user")
    return config


def connect(access: ClusterAccess | None = None, *, timeout: float = 10.0) -> Cluster:
    """A Cluster for `access` (default: the user's own kubeconfig and its current context)."""
    access = access or ClusterAccess()
    path = access.path
    config = _load_config(access)
    from httpx2 import Timeout  # lazy: loads httpx2
    from lightkube.config.client_adapter import Client, ConnectionParams  # lazy: loads lightkube
    from lightkube.core.exceptions import ConfigError  # lazy: loads lightkube

    try:
        http = Client(config, ConnectionParams(timeout=Timeout(timeout), trust_env=True))
    except (ConfigError, ssl.SSLError, OSError) as err:
        raise InputError(f"kubeconfig {path}: its credentials or CA cannot be loaded: {err}") from None
    return Cluster(
        http=http, server=str(config.cluster.server), context=config.context_name, path=path, namespace=config.namespace
    )


def _tls_failure(err: BaseException) -> bool:
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "SSL" in type(seen).__name__ or "CERTIFICATE" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclass
class Cluster:
    """One API server as one kubeconfig context reaches it. Close it (or use `with`)."""

    http: Any  # httpx2.Client, base_url = the server
    server: str
    context: str
    path: Path
    namespace: str = "default"
    _resources: dict[str, dict[str, ResourceInfo]] = field(default_factory=dict)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # -- transport ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: str | None = None,
        content_type: str = "application/json",
    ) -> Any:
        """One REST call; the response (httpx2.Response) when it is 2xx or 404, else an error."""
        import httpx2  # lazy: loads httpx2

        backoff = Backoff(f"{method} {self.server}{path}", policy=_POLICY)
        headers = {"Content-Type": content_type} if body is not None else {}
        while True:
            try:
                response = self.http.request(method, path, params=params, content=body, headers=headers)
            except httpx2.TransportError as err:
                if _tls_failure(err):
                    raise RemoteError(
                        f"TLS failure talking to the API server at {self.server}: {err}",
                        hint=f"check the cluster's certificate-authority in {self.path} (context {self.context})",
                    ) from None
                if backoff.wait(f"{type(err).__name__}: {err}"):
                    continue
                raise RemoteError(
                    f"the API server at {self.server} does not answer ({type(err).__name__}: {err or 'no reply'})",
                    hint=f"is the cluster up? (kubeconfig {self.path}, context {self.context})",
                ) from None
            status = response.status_code
            if status in RETRY_STATUS and backoff.wait(str(status), retry_after=_retry_after(response)):
                continue
            self._raise_for_access(response, method, path)
            return response

    def _raise_for_access(self, response: Any, method: str, path: str) -> None:
        status = response.status_code
        if status == 401:
            raise RemoteError(
                f"the API server at {self.server} refused the credentials of context {self.context} (401 Unauthorized)",
                hint=f"renew them in {self.path} (an expired token or client certificate?)",
            )
        if status == 403 and _authorization_denied(response):
            raise RemoteError(
                f"forbidden (403): {_status_message(response)}",
                hint=f"the user of context {self.context} needs RBAC permission for {method} {path}",
            )
        if status in RETRY_STATUS:
            raise RemoteError(f"{method} {self.server}{path} kept failing: {status} {_status_message(response)}")

    def get_json(self, path: str, *, params: Mapping[str, str] | None = None) -> dict[str, Any] | None:
        """GET → the object, or None when the server says 404."""
        response = self.request("GET", path, params=params)
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise RemoteError(f"GET {path}: {response.status_code} {_status_message(response)}")
        data: dict[str, Any] = response.json()
        return data

    # -- discovery ---------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """How the server serves apiVersion/kind (NotFoundError: not installed there)."""
        if api_version not in self._resources:
            root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            listing = self.get_json(root) or {}
            self._resources[api_version] = {
                item["kind"]: ResourceInfo(api_version, item["kind"], item["name"], bool(item.get("namespaced")))
                for item in listing.get("resources", [])
                if "/" not in item.get("name", "/")
            }
        info = self._resources[api_version].get(kind)
        if info is None:
            raise NotFoundError(
                f"the cluster at {self.server} does not serve {api_version} {kind}", hint=install_hint(api_version)
            )
        return info

    def require_served(self, objects: list[dict[str, Any]]) -> None:
        """NotFoundError naming the first kind of `objects` the server does not serve, and what
        installs it (trainops.cluster.installs)."""
        for api_version, kind in dict.fromkeys((str(o.get("apiVersion")), str(o.get("kind"))) for o in objects):
            self.resource(api_version, kind)

    def rediscover(self) -> None:
        """Forget what discovery said (after CRDs were installed or removed)."""
        self._resources.clear()

    def served(self, api_version: str, kind: str) -> bool:
        try:
            self.resource(api_version, kind)
        except NotFoundError:
            return False
        return True

    def path_of(self, api_version: str, kind: str, *, namespace: str | None = None, name: str | None = None) -> str:
        info = self.resource(api_version, kind)
        root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        where = f"/namespaces/{namespace or self.namespace}" if info.namespaced else ""
        return f"{root}{where}/{info.plural}" + (f"/{name}" if name else "")

    # -- reads -------------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        return self.get_json(self.path_of(api_version, kind, namespace=namespace, name=name))

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of a kind (in a namespace, for namespaced kinds; all namespaces with namespace='*'),
        filtered by a label ``selector`` and a field selector ``fields``."""
        info = self.resource(api_version, kind)
        if info.namespaced and namespace == "*":
            root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            path = f"{root}/{info.plural}"
        else:
            path = self.path_of(api_version, kind, namespace=namespace)
        params = {"labelSelector": selector} if selector else {}
        if fields:
            params["fieldSelector"] = fields
        data = self.get_json(path, params=params or None) or {}
        items: list[dict[str, Any]] = data.get("items", [])
        return items

    def logs(
        self,
        *,
        namespace: str,
        pod: str,
        container: str | None = None,
        previous: bool = False,
        tail: int | None = None,
        timestamps: bool = False,
    ) -> str:
        """A container's log (its last `tail` lines; each after its RFC 3339 time with `timestamps`).
        The API server fetches it from the pod's node (its kubelet): when it cannot, the error names
        the pod and says so, whatever the status the server answered."""
        params = {"container": container} if container else {}
        if previous:
            params["previous"] = "true"
        if tail is not None:
            params["tailLines"] = str(tail)
        if timestamps:
            params["timestamps"] = "true"
        where = f"logs of pod {namespace}/{pod}"
        try:
            response = self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log", params=params)
        except RemoteError as err:
            hint = err.hint or "the API server reads a pod's log from its node's kubelet: is the node reachable?"
            raise RemoteError(f"{where}: {err.message}", hint=hint) from None
        if response.status_code >= 400:
            raise RemoteError(f"{where}: {_status_message(response)}")
        text: str = response.text
        return text

    # -- writes (dry runs; the stand-in applier; cordoning a failed node) ------------------

    def apply(
        self, obj: Mapping[str, Any], *, dry_run: bool, field_manager: str = FIELD_MANAGER, force: bool = True
    ) -> dict[str, Any]:
        """Server-side apply with fieldValidation=Strict (dryRun=All when dry_run): the object as
        the server would store it, or ObjectRefused with its message."""
        meta = obj.get("metadata") or {}
        path = self.path_of(
            str(obj["apiVersion"]), str(obj["kind"]), namespace=meta.get("namespace"), name=str(meta["name"])
        )
        params = {"fieldManager": field_manager, "fieldValidation": "Strict", "force": "true" if force else "false"}
        if dry_run:
            params["dryRun"] = "All"
        response = self.request(
            "PATCH", path, params=params, body=json.dumps(obj), content_type="application/apply-patch+yaml"
        )
        if response.status_code >= 400:
            raise _refusal(response)
        data: dict[str, Any] = response.json()
        return data

    def merge_patch(
        self, api_version: str, kind: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386) of one object: the object as stored, or ObjectRefused
        (409 when the patch names a metadata.resourceVersion that is no longer current). Only
        trainops.cluster.nodes calls it: cordoning a failed node, the one write outside git."""
        path = self.path_of(api_version, kind, namespace=namespace, name=name)
        response = self.request(
            "PATCH",
            path,
            params={"fieldManager": FIELD_MANAGER},
            body=json.dumps(patch),
            content_type="application/merge-patch+json",
        )
        if response.status_code == 404:
            raise NotFoundError(f"{kind} {name} is not on the cluster at {self.server}")
        if response.status_code >= 400:
            raise _refusal(response)
        data: dict[str, Any] = response.json()
        return data

    def delete(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> bool:
        """Delete (background propagation); False when it was already gone."""
        path = self.path_of(api_version, kind, namespace=namespace, name=name)
        body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        response = self.request("DELETE", path, body=body)
        if response.status_code == 404:
            return False
        if response.status_code >= 400:
            raise _refusal(response)
        return True


def _retry_after(response: Any) -> float | None:
    return retry_after_seconds(response.headers.get("Retry-After"))


def _status(response: Any) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _authorization_denied(response: Any) -> bool:
    """A 403 from the authorizer (RBAC: `… is forbidden: User "u" cannot patch resource …`), not
    a refusal of the object that the server also answers 403 (an admission webhook's denial,
    an exceeded ResourceQuota, a namespace being deleted): those are the object's errors."""
    return bool(re.search(r'is forbidden: User ".*" cannot ', _status_message(response)))


def _status_message(response: Any) -> str:
    message = _status(response).get("message")
    text = str(message) if message else response.text.strip()[:300]
    return _shorten(" ".join(text.split())) or response.reason_phrase


def _shorten(text: str) -> str:
    """The API server quotes a whole invalid value (a pod template is kilobytes): keep its words."""
    start = text.find("Invalid value: ")
    if start < 0 or len(text) <= 300 or text[start + 15 : start + 16] not in ("{", "["):
        return text
    end = max(text.rfind("}: "), text.rfind("]: "))
    return text[: start + 15] + "(the object's value)" + text[end + 1 :] if end > start else text


def _refusal(response: Any) -> ObjectRefused:
    status = _status(response)
    details = status.get("details") or {}
    causes = [
        Cause(field=str(c.get("field", "")), message=" ".join(str(c.get("message", "")).split()))
        for c in details.get("causes") or []
        if isinstance(c, dict)
    ]
    return ObjectRefused(
        _status_message(response), status=response.status_code, reason=str(status.get("reason", "")), causes=causes
    )
