"""A repository that holds blobs and no tag (a killed first push) is no artifact: the
browser's repositories page and API show it marked "no tags", as `registry ls -l` does."""

from __future__ import annotations

import html
import io
from pathlib import Path

import pytest
import requests

from trainops.registry.backends.base import BlobSource, sha256_digest
from trainops.ui.index import refresh
from ui.conftest import start_site


def test_a_repository_with_blobs_and_no_tag_is_marked_no_tags(
    request: pytest.FixtureRequest, tmp_path: Path, _ui_cache: None
) -> None:
    sites = start_site(request, "file", tmp_path)
    site = next(sites)
    try:
        browser = site.browser
        interrupted = site.filled.repo("tiny/interrupted")
        data = b"the first shard of a checkpoint whose push was killed"
        ref = browser.registries.ref(interrupted)
        source = BlobSource(digest=sha256_digest(data), size=len(data), opener=lambda: io.BytesIO(data))
        browser.registries.backend(ref).upload_blob(ref.repository, source, lambda n: None)  # no manifest, no tag
        assert not refresh(browser.index, browser.registries, urls=browser.urls).errors
        listed = requests.get(site.url("/api/repositories"), timeout=30).json()["repositories"]
        counts = {r["url"]: (r["artifacts"], r["tags"]) for r in listed}
        assert counts[interrupted] == (0, 0) and counts[site.filled.repo("tiny/model")] == (1, 1)
        page = requests.get(site.url("/"), timeout=30)
        assert page.status_code == 200
        text = html.unescape(page.text)
        rows = {row.split("</a>", 1)[0].rsplit(">", 1)[-1]: row for row in text.split("<tr>")[2:]}
        mark = "(no tags: no artifact; an interrupted push's blobs)"
        assert mark in rows[interrupted], rows[interrupted]
        assert [url for url, row in rows.items() if mark in row] == [interrupted]  # the artifacts are not marked
    finally:
        next(sites, None)
