"""The registry browser shows, on a release's page, whether it is signed, by which key,
and its provenance (a real server over a file:// registry, pages fetched over HTTP)."""

from __future__ import annotations

import html

import requests
from ui.conftest import ServerThread

from tests.eval.conftest import Project
from tests.signing.conftest import signed_release
from trainops.registry.store import resolve
from trainops.ui import queries
from trainops.ui.app import create_app
from trainops.ui.index import Index, refresh
from trainops.ui.views import Browser
from trainops_testing.services import free_port


def test_a_release_page_shows_signature_key_and_provenance(local_project: Project) -> None:
    result = signed_release(local_project)
    url = f"file://{local_project.root / '.trainops/registry'}"
    with local_project.registries() as regs:
        digest = resolve(regs, ref=regs.ref(result["ref"])).manifest.digest
        checkpoint = resolve(regs, ref=regs.ref(result["checkpoint"])).manifest.digest
        index = Index(local_project.root / "index.sqlite")
        assert not refresh(index, regs, urls=[url]).errors
        found = queries.artifact(index.connect(), digest=digest)
        assert found.signing is not None and found.signing.signed and found.signing.keys == [result["signedBy"]]
        assert found.signing.provenance is not None
        assert f"checkpoint {result['checkpoint'].split(':step')[0]}" in " ".join(found.signing.provenance.dependencies)
        server = ServerThread(create_app(Browser(index=index, registries=regs, urls=[url])), free_port())
        server.start()
        try:
            page = html.unescape(requests.get(f"http://127.0.0.1:{server.port}/artifact/{digest}", timeout=30).text)
            unsigned = html.unescape(
                requests.get(f"http://127.0.0.1:{server.port}/artifact/{checkpoint}", timeout=30).text
            )
        finally:
            server.stop()
    assert "signed by" in page and result["signedBy"] in page
    assert "https://trainops.dev/provenance/model/v1" in page and checkpoint in page
    assert 'id="signing"' not in unsigned  # a checkpoint without records has no such section
