"""The registry browser as an ASGI app (Starlette): HTML pages, the JSON API, downloads.

Read-only: every route answers GET (and HEAD) only, so any other method is 405. Pages are
Jinja2 templates with autoescape on; data a page's script needs is embedded with `tojson`
inside a `<script type="application/json">` block (never executed, `<` escaped), and the
Content-Security-Policy allows scripts from this server only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from trainops.errors import InputError, NotFoundError, TrainopsError
from trainops.registry.context import Registries
from trainops.ui import api, graph, incidents, queries
from trainops.ui.index import Index
from trainops.ui.models import LineageGraph
from trainops.ui.security import Guard
from trainops.units import format_size

if TYPE_CHECKING:
    from pydantic import BaseModel
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from trainops.spec import Manifest

STATIC = Path(__file__).resolve().parent / "static"


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

    def drain_after(self) -> tuple[int, float]:
        """train.faults.drainAfter of the manifest it was started with (else 3 in 24 h)."""
        from trainops.spec.common import duration_seconds

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


def _status(err: TrainopsError) -> int:
    if isinstance(err, NotFoundError):
        return 404
    if isinstance(err, InputError):
        return 400
    return 502


def _environment() -> Any:
    import jinja2

    from trainops.templating import template_root

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


def _api_handler(browser: Browser, endpoint: api.Endpoint) -> Any:
    from starlette.responses import JSONResponse

    def handle(request: Request) -> Response:
        args: dict[str, Any] = {**request.query_params, **request.path_params}
        try:
            result = browser.served(endpoint.call(browser.index.connect(), args))
        except TrainopsError as err:
            status = _status(err)
            return JSONResponse({"error": str(err), "status": status}, status_code=status)
        return JSONResponse(result.model_dump(mode="json", by_alias=True))

    return handle


class Pages:
    """The HTML pages: each reads one query of the index and renders one template."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.env = _environment()

    def render(self, name: str, status: int = 200, **values: Any) -> Response:
        from starlette.responses import HTMLResponse

        html = self.env.get_template(name).render(urls=self.browser.urls, **values)
        return HTMLResponse(html, status_code=status)

    def guarded(self, page: Any) -> Any:
        def handle(request: Request) -> Response:
            try:
                return page(request, self.browser.index.connect())  # type: ignore[no-any-return]
            except TrainopsError as err:
                status = _status(err)
                return self.render("error.html", status=status, message=str(err), code=status)

        return handle

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
        return self.render("artifact.html", a=found, config=config)

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
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from trainops.ui.download import download_route

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
        Route("/blobs/{digest}", download_route(browser, pages), name="blob"),
        Route("/openapi.json", lambda request: JSONResponse(document), name="openapi"),
        *[Route(e.path, _api_handler(browser, e), name=f"api-{e.name}") for e in api.ENDPOINTS],
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes)
    return Guard(app, token=browser.token, loopback_only=browser.loopback_only)  # type: ignore[return-value]
