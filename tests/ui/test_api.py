"""The JSON API and the server's guard, over a real uvicorn server: read-only (405), token,
host check, security headers, verified downloads, and the OpenAPI checked by schemathesis."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings

from trainops_testing.planted import secret
from ui.conftest import Site, start_site
from ui.helpers import COMMIT, HOSTILE_FILE, RUN

METHODS = ("POST", "PUT", "DELETE", "PATCH")


def _get(site: Site, path: str, **kwargs: object) -> requests.Response:
    return requests.get(site.url(path), timeout=30, **kwargs)  # type: ignore[arg-type]


def test_every_route_is_read_only(file_site: Site) -> None:
    f = file_site.filled
    repo = quote(f.repo("tiny/checkpoints"), safe="")
    paths = [
        "/",
        f"/repository?repository={repo}",
        f"/artifact/{f.model}",
        f"/lineage/{f.model}",
        "/api/repositories",
        f"/api/artifacts/{f.model}",
        f"/api/tags?repository={repo}",
        "/openapi.json",
        "/static/app.js",
        f"/blobs/{f.model}?repository={repo}",
    ]
    for path in paths:
        for method in METHODS:
            resp = requests.request(method, file_site.url(path), timeout=30, data=b"x")
            assert resp.status_code == 405, (method, path, resp.status_code)


def test_security_headers_on_pages_and_api(file_site: Site) -> None:
    for path in ("/", "/api/repositories", "/static/app.js", "/nope"):
        resp = _get(file_site, path)
        csp = resp.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert resp.headers["x-content-type-options"] == "nosniff"


def test_foreign_host_header_is_refused(file_site: Site) -> None:
    """Bound to loopback, a request naming another host (DNS rebinding) gets nothing."""
    resp = _get(file_site, "/api/repositories", headers={"Host": "attacker.example:8321"})
    assert resp.status_code == 421
    assert _get(file_site, "/api/repositories", headers={"Host": "localhost:8321"}).status_code == 200


@pytest.fixture(scope="module")
def token_site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _ui_cache: None
) -> Iterator[Site]:
    yield from start_site(request, "file", tmp_path_factory.mktemp("ui-token"), token=secret("ui-token"))


def test_token_is_required_when_set(token_site: Site) -> None:
    assert _get(token_site, "/api/repositories").status_code == 401
    assert _get(token_site, "/").status_code == 401
    assert _get(token_site, "/api/repositories", headers={"Authorization": "Bearer wrong"}).status_code == 401
    token = secret("ui-token")
    ok = _get(token_site, "/api/repositories", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and ok.json()["repositories"]
    session = requests.Session()
    first = session.get(token_site.url(f"/?token={token}"), timeout=30, allow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=Strict" in first.headers["set-cookie"]
    assert session.get(token_site.url("/api/repositories"), timeout=30).status_code == 200
    assert _get(token_site, "/?token=wrong").status_code == 401


def test_api_reads_the_index(site: Site) -> None:
    f = site.filled
    repo = f.repo("tiny/checkpoints")
    repos = {r["url"]: r for r in _get(site, "/api/repositories").json()["repositories"]}
    assert repos[repo]["artifacts"] == 4 and repos[repo]["tags"] == 4  # step-200..400 + eval; step-100 pruned
    tags = _get(site, "/api/tags", params={"repository": repo}).json()
    assert [t["tag"] for t in tags["tags"]] == ["eval-step-400", "step-200", "step-300", "step-400"]
    assert tags["tags"][1]["metrics"] == {"loss": 2.75, "lr": 0.001}
    art = _get(site, f"/api/artifacts/{f.checkpoints[400]}").json()
    assert {p["digest"]: p["relation"] for p in art["parents"]} == {
        f.checkpoints[300]: "resumed-from",
        f.image: "image",
    }
    assert {c["digest"]: c["relation"] for c in art["children"]} == {
        f.model: "derived-from",
        f.eval_report: "evaluated",
    }
    assert [r["digest"] for r in art["referrers"]] == [f.eval_report]
    report = art["referrers"][0]
    assert report["metrics"] == {"val_loss": 1.9} and report["passed"] is True
    assert report["gates"] == [{"metric": "val_loss", "op": "<=", "value": 2.5, "actual": 1.9, "passed": True}]
    parents = _get(site, f"/api/artifacts/{f.checkpoints[200]}").json()["parents"]
    pruned = next(p for p in parents if p["relation"] == "resumed-from")
    assert pruned["digest"] == f.checkpoints[100] and pruned["pruned"] is True
    diff = _get(site, "/api/diff", params={"a": f.checkpoints[300], "b": f.checkpoints[400]}).json()
    assert [m["path"] for m in diff["modified"]] == ["model.safetensors"] and diff["unchanged"] == 1
    for q, matched in ((f.model[7:19], "digest"), (COMMIT[:10], "gitCommit"), (RUN, "runId"), ("step-3", "tag")):
        hits = _get(site, "/api/search", params={"q": q}).json()["hits"]
        assert hits and all(h["matched"] == matched for h in hits), (q, hits)
    assert _get(site, "/api/tags", params={"repository": repo + "-nope"}).status_code == 404
    assert _get(site, "/api/tags", params={"repository": repo, "page": "x"}).status_code == 400
    assert _get(site, "/api/artifacts/sha256:" + "0" * 64).status_code == 404


def test_download_by_digest_is_verified(tmp_path: Path, request: pytest.FixtureRequest, _ui_cache: None) -> None:
    sites = start_site(request, "file", tmp_path)
    site = next(sites)
    try:
        f = site.filled
        repo = f.repo("tiny/hostile")
        art = _get(site, f"/api/artifacts/{f.hostile}").json()
        entry = next(x for x in art["files"] if x["path"] == HOSTILE_FILE)
        resp = _get(site, f"/blobs/{entry['digest']}", params={"repository": repo})
        assert resp.status_code == 200 and resp.content == b"x"
        assert resp.headers["content-type"] == "application/octet-stream"
        assert "attachment" in resp.headers["content-disposition"]
        assert _get(site, "/blobs/not-a-digest", params={"repository": repo}).status_code == 400
        other = "sha256:" + hashlib.sha256(b"never pushed").hexdigest()
        assert _get(site, f"/blobs/{other}", params={"repository": repo}).status_code == 404
        # the stored bytes are damaged: nothing is sent
        blob = Path(repo.removeprefix("file://")) / "blobs" / "sha256" / entry["digest"][7:]
        blob.chmod(0o644)
        blob.write_bytes(b"z")
        damaged = _get(site, f"/blobs/{entry['digest']}", params={"repository": repo})
        assert damaged.status_code == 502
        assert damaged.headers["content-type"].startswith("text/html") and "digest" in damaged.text
    finally:
        next(sites, None)


def test_api_conforms_to_its_openapi(file_site: Site) -> None:
    """schemathesis generates requests from /openapi.json for every operation and checks each
    answer: no server error, status and body as documented (bounded: 25 examples each)."""
    api = schemathesis.openapi.from_url(file_site.url("/openapi.json"))
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) == 9  # /api, its index, among them

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate()

        check()


@pytest.mark.parametrize("q", ["\x1c", "\x1f", "\x85", "\u00a0x"])
def test_search_accepts_what_its_schema_accepts(file_site: Site, q: str) -> None:
    """Found by the schema fuzzing: Python's str.strip() trims \\x1c-\\x1f and \\x85, which the
    schema's pattern (ECMAScript) counts as text; such a query is searched, not refused."""
    resp = _get(file_site, f"/api/search?q={quote(q)}")
    assert resp.status_code == 200, resp.text
    assert resp.json()["hits"] == []


@pytest.mark.parametrize(("q", "says"), [(" ", "1 to 200 characters"), ("\t\r\n", "1 to 200"), ("", "is required")])
def test_search_refuses_a_blank_query(file_site: Site, q: str, says: str) -> None:
    resp = _get(file_site, f"/api/search?q={quote(q)}")
    assert resp.status_code == 400
    assert says in resp.json()["error"]


def test_the_repositories_page_labels_created_as_what_the_spec_says(file_site: Site) -> None:
    """`created` is SOURCE_DATE_EPOCH or the newest file's mtime (registry/SPEC.md): the
    column says so and does not call it the last push."""
    page = _get(file_site, "/")
    assert page.status_code == 200
    assert "last push" not in page.text.lower()
    assert ">newest created</th>" in page.text


def test_the_api_answers_with_its_index(file_site: Site) -> None:
    index = _get(file_site, "/api")
    assert index.status_code == 200, index.text
    body = index.json()
    listed = {e["path"]: e for e in body["endpoints"]}
    documented = _get(file_site, body["openapi"]).json()["paths"]
    assert set(listed) == set(documented) and "/api/repositories" in listed
    assert listed["/api/tags"]["parameters"][0] == "repository"  # required first
    for path, endpoint in listed.items():  # each answers what it says, the ones that need nothing at once
        if not endpoint["parameters"] and "{" not in path:
            assert _get(file_site, path).status_code == 200, path


def test_the_curve_offers_every_metric_the_tag_table_shows(file_site: Site) -> None:
    """The repository page's table shows each tag's metrics, eval reports' among them; the
    curve plots each of them, an eval report's at its checkpoint's step."""
    repo = file_site.filled.repo("tiny/checkpoints")
    tags = _get(file_site, "/api/tags", params={"repository": repo}).json()["tags"]
    shown = sorted({name for t in tags for name in t["metrics"]})
    curve = _get(file_site, "/api/curve", params={"repository": repo}).json()
    assert curve["metrics"] == shown and "val_loss" in shown, (curve["metrics"], shown)
    evaluated = _get(file_site, "/api/curve", params={"repository": repo, "metric": "val_loss"}).json()
    assert [(p["step"], p["tag"], p["value"]) for p in evaluated["points"]] == [(400, "eval-step-400", 1.9)]
