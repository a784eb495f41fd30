"""What every page of the browser shares: the Browser it serves, the template environment,
and the error page (app.py's pages and download.py's blob route both render through it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from trainops.errors import InputError, NotFoundError, TrainopsError
from trainops.manifest.common import duration_seconds
from trainops.registry.context import Registries
from trainops.rollout.lineage import pool_history
from trainops.templating import template_root
from trainops.ui import graph
from trainops.ui.index import Index
from trainops.ui.models import LineageGraph
from trainops.units import format_size

if TYPE_CHECKING:
    from pydantic import BaseModel
    from starlette.requests import Request
    from starlette.responses import Response

    from trainops.cluster.access import ClusterAccess
    from trainops.manifest import Manifest
    from trainops.rollout.audit import RolloutStatus


@dataclass
class Browser:
    """What the app serves: the index, the registries it reads, how it is guarded, and the
    manifest it was started with (its spec.rollout adds rollout commits to lineage graphs)."""

    index: Index
    registries: Registries
    urls: list[str]
    token: str | None = None
    loopback_only: bool = True
    manifest: Manifest | None = None
    # started with --cluster, --kubeconfig or --context: the rollout page adds what the cluster reports
    cluster: ClusterAccess | None = None

    def drain_after(self) -> tuple[int, float]:
        """train.faults.drainAfter of the manifest it was started with (else 3 in 24 h)."""

        train = self.manifest.pipeline.spec.train if self.manifest is not None else None
        if train is None:
            return 3, 86400.0
        policy = train.faults.drain_after
        return policy.incidents, duration_seconds(policy.window)

    def served(self, result: BaseModel) -> BaseModel:
        """A lineage graph with the rollouts that served its releases (when the manifest
        sets spec.rollout); any other result as it is."""
        if isinstance(result, LineageGraph) and self.manifest is not None and self.manifest.pipeline.spec.rollout:
            return graph.add_rollouts(result, manifest=self.manifest)
        return result


@dataclass(frozen=True)
class Serving:
    """How the manifest's rollout serves one release (an artifact page's note): its role
    there, the rollout's state (git's, and the cluster's with a kubeconfig), or why that
    state could not be read."""

    role: str  # stable or canary; "" when the state could not be read
    status: RolloutStatus | None = None
    error: str | None = None


def serving(browser: Browser, digest: str) -> Serving | None:
    """The release `digest` as the browser's manifest serves it; None when the manifest sets
    no rollout or serves other releases."""
    if browser.manifest is None or browser.manifest.pipeline.spec.rollout is None:
        return None
    from trainops.rollout import rollout_status  # lazy: loads ssl, socketserver

    try:
        status = rollout_status(browser.manifest, access=browser.cluster)
        tracks = (("stable", status.stable), ("canary", status.canary))
        roles = [(role, served.digest) for role, served in tracks if served is not None]
    except TrainopsError as err:  # the page still shows the artifact
        return Serving(role="", error=err.message)
    role = next((role for role, served in roles if served == digest), None)
    return Serving(role=role, status=status) if role else None


@dataclass(frozen=True)
class PoolsNote:
    """The pools that served a release of a disaggregated rollout, oldest first, or why they
    could not be read."""

    served: list[Any]  # trainops.rollout.lineage.PoolServed
    error: str | None = None


def served_pools(browser: Browser, digest: str) -> PoolsNote | None:
    """The InferencePools, revisions and weights the GitOps history shows serving `digest`; None
    when the manifest's rollout is not disaggregated or no pool served it."""
    manifest = browser.manifest
    if (
        manifest is None
        or manifest.pipeline.spec.rollout is None
        or manifest.pipeline.spec.rollout.disaggregation is None
    ):
        return None

    try:
        found = pool_history(manifest, digest)
    except TrainopsError as err:  # the page still shows the artifact
        return PoolsNote([], err.message)
    return PoolsNote(found) if found else None


def status_of(err: TrainopsError) -> int:
    if isinstance(err, NotFoundError):
        return 404
    if isinstance(err, InputError):
        return 400
    return 502


def _environment() -> Any:
    import jinja2  # lazy: loads jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_root() / "ui")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["size"] = format_size
    env.filters["show"] = lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else str(v)
    env.filters["q"] = lambda value: quote(str(value), safe="")
    env.filters["short"] = lambda digest: str(digest)[7:19] if str(digest).startswith("sha256:") else str(digest)
    return env


class Views:
    """Renders the templates of the browser; an error becomes the error page with its status."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.env = _environment()

    def render(self, name: str, status: int = 200, **values: Any) -> Response:
        from starlette.responses import HTMLResponse  # lazy: loads starlette

        html = self.env.get_template(name).render(urls=self.browser.urls, **values)
        return HTMLResponse(html, status_code=status)

    def error_page(self, err: TrainopsError) -> Response:
        status = status_of(err)
        return self.render("error.html", status=status, message=str(err), code=status)

    def guarded(self, page: Any) -> Any:
        def handle(request: Request) -> Response:
            try:
                return page(request, self.browser.index.connect())  # type: ignore[no-any-return]
            except TrainopsError as err:
                return self.error_page(err)

        return handle
