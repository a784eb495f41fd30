"""The registry browser as an ASGI app (Starlette): HTML pages, the JSON API, downloads.

Read-only: every route answers GET (and HEAD) only, so any other method is 405. Pages are
Jinja2 templates with autoescape on; data a page's script needs is embedded with `tojson`
inside a `<script type="application/json">` block (never executed, `<` escaped), and the
Content-Security-Policy allows scripts from this server only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.errors import NotFoundError, TrainopsError
from trainops.rollout.slo_status import status
from trainops.ui import api, graph, incidents, queries
from trainops.ui.download import download_route
from trainops.ui.security import Guard
from trainops.ui.views import Browser, Views, served_pools, serving, status_of

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response


STATIC = Path(__file__).resolve().parent / "static"


def _api_handler(browser: Browser, endpoint: api.Endpoint) -> Any:
    from starlette.responses import JSONResponse  # lazy: loads starlette

    def handle(request: Request) -> Response:
        args: dict[str, Any] = {**request.query_params, **request.path_params}
        try:
            result = browser.served(endpoint.call(browser.index.connect(), args))
        except TrainopsError as err:
            status = status_of(err)
            return JSONResponse({"error": str(err), "status": status}, status_code=status)
        return JSONResponse(result.model_dump(mode="json", by_alias=True))

    return handle


class Pages(Views):
    """The HTML pages: each reads one query of the index and renders one template."""

    def home(self, request: Request, db: Any) -> Response:
        return self.render("repositories.html", listing=queries.repositories(db))

    def repository(self, request: Request, db: Any) -> Response:
        url = api._need(dict(request.query_params), "repository")
        page = api._int(dict(request.query_params), "page", 1)
        listing = queries.tags(db, repository=url, page=page, per_page=100)
        names = sorted({m for t in listing.tags for m in t.metrics})
        pages = max(1, -(-listing.total // listing.per_page))
        return self.render("repository.html", listing=listing, metric_names=names, pages=pages)

    def artifact(self, request: Request, db: Any) -> Response:
        found = queries.artifact(
            db, digest=request.path_params["digest"], repository=request.query_params.get("repository")
        )
        config = _pretty(found.config)
        note = serving(self.browser, found.digest) if found.kind == "model" else None
        pools = served_pools(self.browser, found.digest) if found.kind == "model" else None
        return self.render("artifact.html", a=found, config=config, serving=note, pools=pools)

    def lineage(self, request: Request, db: Any) -> Response:
        digest = request.path_params["digest"]
        found = self.browser.served(graph.lineage(db, digest=digest, repository=request.query_params.get("repository")))
        return self.render("lineage.html", g=found, data=found.model_dump(mode="json", by_alias=True))

    def curve(self, request: Request, db: Any) -> Response:
        args = dict(request.query_params)
        found = queries.curve(db, repository=api._need(args, "repository"), metric=args.get("metric") or None)
        return self.render("curve.html", c=found, data=found.model_dump(mode="json", by_alias=True))

    def diff(self, request: Request, db: Any) -> Response:
        args = dict(request.query_params)
        found = queries.diff(db, a=api._need(args, "a"), b=api._need(args, "b"), repository=args.get("repository"))
        return self.render("diff.html", d=found)

    def incidents(self, request: Request, db: Any) -> Response:
        args = dict(request.query_params)
        threshold, window = self.browser.drain_after()
        found = incidents.incidents(
            db, run=args.get("run") or None, node=args.get("node") or None, threshold=threshold, window=window
        )
        return self.render("incidents.html", result=found)

    def report(self, request: Request, db: Any) -> Response:
        """A run's post-incident report: signal → diagnosis → action → recovery per incident."""
        found = incidents.run_report(db, self.browser.registries, run=api._need(dict(request.query_params), "run"))
        return self.render("report.html", r=found)

    def rollout(self, request: Request, db: Any) -> Response:
        """The release served by the manifest's spec.rollout, as the GitOps repo says and,
        started with a kubeconfig, as Argo CD and Argo Rollouts report it (read-only)."""
        from trainops.rollout import rollout_status  # lazy: loads ssl, socketserver

        b = self.browser
        if b.manifest is None or b.manifest.pipeline.spec.rollout is None:
            raise NotFoundError("no rollout to show: the browser was started without a manifest that sets spec.rollout")
        status = rollout_status(b.manifest, access=b.cluster)
        return self.render("rollout.html", s=status, live=status.live)

    def slo(self, request: Request, db: Any) -> Response:
        """Each SLO of the manifest's spec.slo as Prometheus has it now (trainops.rollout.slo_status)."""

        b = self.browser
        if b.manifest is None or b.manifest.pipeline.spec.slo is None:
            raise NotFoundError(
                "no service levels to show: the browser was started without a manifest that sets spec.slo"
            )
        return self.render("slo.html", report=status(b.manifest))

    def search(self, request: Request, db: Any) -> Response:
        q = request.query_params.get("q", "")
        found = queries.search(db, query=q) if q.strip(queries.SEARCH_BLANKS) else None
        return self.render("search.html", q=q, result=found)


def _pretty(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def create_app(browser: Browser) -> Starlette:
    """The Starlette app of a Browser (serve it with uvicorn, or test it in-process)."""
    from starlette.applications import Starlette  # lazy: loads starlette
    from starlette.responses import JSONResponse  # lazy: loads starlette
    from starlette.routing import Mount, Route  # lazy: loads starlette
    from starlette.staticfiles import StaticFiles  # lazy: loads starlette

    pages = Pages(browser)
    document = api.openapi()
    routes = [
        Route("/", pages.guarded(pages.home), name="home"),
        Route("/repository", pages.guarded(pages.repository), name="repository"),
        Route("/artifact/{digest}", pages.guarded(pages.artifact), name="artifact"),
        Route("/lineage/{digest}", pages.guarded(pages.lineage), name="lineage"),
        Route("/curve", pages.guarded(pages.curve), name="curve"),
        Route("/diff", pages.guarded(pages.diff), name="diff"),
        Route("/search", pages.guarded(pages.search), name="search"),
        Route("/incidents", pages.guarded(pages.incidents), name="incidents"),
        Route("/incidents/report", pages.guarded(pages.report), name="report"),
        Route("/rollout", pages.guarded(pages.rollout), name="rollout"),
        Route("/slo", pages.guarded(pages.slo), name="slo"),
        Route("/blobs/{digest}", download_route(browser, pages), name="blob"),
        Route("/openapi.json", lambda request: JSONResponse(document), name="openapi"),
        *[Route(e.path, _api_handler(browser, e), name=f"api-{e.name}") for e in api.ENDPOINTS],
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes)
    return Guard(app, token=browser.token, loopback_only=browser.loopback_only)  # type: ignore[return-value]
