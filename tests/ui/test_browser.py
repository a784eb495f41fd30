"""The pages in a real browser (Debian's chromium through Playwright) over registries on
file://, oci:// and s3://: the click path, the graph, the curve, and hostile content."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from ui.conftest import Site
from ui.helpers import COMMIT, HOSTILE, HOSTILE_FILE, STEPS

TIMEOUT = 15_000


def _click_node(page: Any, node_id: str) -> None:
    """Click a node of the cytoscape graph where the browser drew it."""
    box = page.locator("#graph").bounding_box()
    pos = page.evaluate("(id) => window.trainopsGraph.getElementById(id).renderedPosition()", node_id)
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])


def test_repository_artifact_lineage_parent(site: Site, page: Any, tmp_path: Path) -> None:
    f = site.filled
    page.goto(site.url("/"))
    page.get_by_role("link", name=f.repo("tiny/checkpoints"), exact=True).click()
    page.screenshot(path=str(tmp_path / f"repository-{site.scheme}.png"), full_page=True)
    # natural order: step-100 is pruned (record only), so 200, 300, 400 then eval-step-400
    tags = page.locator("#tags a.tag").all_inner_texts()
    assert tags == ["eval-step-400", "step-200", "step-300", "step-400"]
    page.get_by_role("link", name="step-400", exact=True).click()
    assert page.locator("#digest").inner_text() == f.checkpoints[400]
    assert "val_loss" in page.locator("section.referrer").inner_text()  # the eval report, a referrer
    page.screenshot(path=str(tmp_path / f"artifact-{site.scheme}.png"), full_page=True)
    page.locator("#lineage-link").click()
    page.wait_for_selector("#graph[data-nodes]", timeout=TIMEOUT)
    hops = [f"git:{COMMIT}", f.image, f.dataset, *f.checkpoints.values(), f.eval_report, f.model]
    assert int(page.locator("#graph").get_attribute("data-nodes")) == len(hops)
    for hop in hops:
        assert page.evaluate("(id) => window.trainopsGraph.getElementById(id).length", hop) == 1, hop
    pruned = page.evaluate("(id) => window.trainopsGraph.getElementById(id).data('faded')", f.checkpoints[STEPS[0]])
    assert pruned == 1
    page.screenshot(path=str(tmp_path / f"lineage-{site.scheme}.png"), full_page=True)
    _click_node(page, f.checkpoints[300])  # the parent of step-400
    page.wait_for_url("**/artifact/**", timeout=TIMEOUT)
    assert page.locator("#digest").inner_text() == f.checkpoints[300]
    assert not page.errors and not page.dialogs


def test_curve_has_a_point_per_checkpoint(site: Site, page: Any, tmp_path: Path) -> None:
    page.goto(site.url("/curve?repository=" + quote(site.filled.repo("tiny/checkpoints"), safe="")))
    page.wait_for_selector("#curve[data-points]", timeout=TIMEOUT)
    assert int(page.locator("#curve").get_attribute("data-points")) == len(STEPS)
    drawn = page.evaluate("() => window.trainopsCurve.data[1]")
    assert drawn == [3.5, 2.75, 2.25, 2.0]
    assert page.locator("#curve canvas").count() == 1
    page.screenshot(path=str(tmp_path / f"curve-{site.scheme}.png"), full_page=True)
    assert not page.errors


def _no_injection(page: Any) -> None:
    assert page.dialogs == []
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("img").count() == 0
    sources = page.evaluate("() => Array.from(document.scripts).map(s => s.src ? new URL(s.src).pathname : s.type)")
    assert all(s.startswith("/static/") or s == "application/json" for s in sources), sources


def test_hostile_values_are_shown_as_text(file_site: Site, page: Any, tmp_path: Path) -> None:
    f = file_site.filled
    repo = quote(f.repo("tiny/hostile"), safe="")
    pages = [
        f"/artifact/{f.hostile}?repository={repo}",
        f"/repository?repository={repo}",
        f"/lineage/{f.hostile}",
        f"/curve?repository={repo}",
        "/search?q=" + quote(HOSTILE, safe=""),
    ]
    for i, path in enumerate(pages):
        page.goto(file_site.url(path))
        page.wait_for_load_state("load")
        _no_injection(page)
        page.screenshot(path=str(tmp_path / f"hostile-{i}.png"), full_page=True)
    page.goto(file_site.url(pages[0]))
    text = page.locator("main").inner_text()
    assert HOSTILE in text and HOSTILE_FILE in text  # annotation, run id, metric and file name, as text
    page.goto(file_site.url(pages[2]))
    page.wait_for_selector("#graph[data-nodes]", timeout=TIMEOUT)
    _no_injection(page)
    assert not page.errors


def test_diff_two_versions_from_the_tag_page(file_site: Site, page: Any, tmp_path: Path) -> None:
    f = file_site.filled
    page.goto(file_site.url("/repository?repository=" + quote(f.repo("tiny/checkpoints"), safe="")))
    page.get_by_label("diff from step-300").check()
    page.get_by_label("diff to step-400").check()
    page.get_by_role("button", name="Diff a → b").click()
    page.wait_for_url("**/diff?**", timeout=TIMEOUT)
    assert page.locator("#summary").inner_text().startswith("0 added, 0 removed, 1 modified, 1 unchanged")
    assert page.locator("#changes tr.modified td").nth(1).inner_text() == "model.safetensors"
    page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
    # search by run id finds every checkpoint of the run, linked to its page
    page.goto(file_site.url("/search?q=run-42"))
    assert page.locator("#hits tbody tr").count() == len(STEPS)
    assert not page.errors and not page.dialogs
