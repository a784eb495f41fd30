"""The smaller stumbles of a first day with trainops, each as a new user met it.

- `registry ls oci://HOST:PORT` lists the registry's repositories (its catalog), as the
  help says, instead of refusing the URL as a reference without a repository;
- `registry ls -l` of a registry marks a repository that holds no tag (an interrupted first
  push leaves its blobs and no artifact) instead of showing it as if it were one;
- a host name that does not resolve fails at once: no retries, no backoff.
"""

from __future__ import annotations

import io
import time

from tests.cli.runner import run
from tests.services import DistributionRegistry
from trainops.registry.backends.base import BlobSource, sha256_digest
from trainops.registry.context import Registries


def test_registry_ls_of_a_registry_url_lists_its_repositories(registry: DistributionRegistry) -> None:
    env = {"TRAINOPS_INSECURE_REGISTRIES": registry.host}
    for repo in ("team/a", "team/b"):
        done = run("push", __file__, f"oci://{registry.host}/{repo}:v1", env=env)
        assert done.code == 0, done.stderr
    # An interrupted first push: a blob arrived, no manifest, no tag.
    data = b"half a checkpoint"
    with Registries(insecure_registries=(registry.host,)) as registries:
        ref = registries.ref(f"oci://{registry.host}/team/interrupted")
        source = BlobSource(digest=sha256_digest(data), size=len(data), opener=lambda: io.BytesIO(data))
        registries.backend(ref).upload_blob(ref.repository, source, lambda n: None)
    listed = run("registry", "ls", f"oci://{registry.host}", env=env)
    assert listed.code == 0, listed.stderr
    names = listed.stdout.splitlines()
    assert {f"oci://{registry.host}/team/a", f"oci://{registry.host}/team/b"} <= set(names)
    long = run("registry", "ls", "-l", f"oci://{registry.host}/", env=env)
    assert long.code == 0, long.stderr
    rows = long.stdout.splitlines()
    assert f"oci://{registry.host}/team/a" in rows  # an artifact: as it is
    marked = [r for r in rows if r.startswith(f"oci://{registry.host}/team/interrupted")]
    assert marked == [f"oci://{registry.host}/team/interrupted  (no tags: no artifact; an interrupted push's blobs)"]


def test_a_host_that_does_not_resolve_fails_at_once() -> None:
    started = time.monotonic()
    done = run("registry", "ls", "oci://no-such-host.invalid:5000/team/model")
    took = time.monotonic() - started
    assert done.code == 6
    assert "retry" not in done.stderr.lower()
    assert done.stderr.splitlines() == [
        "Error: cannot reach registry no-such-host.invalid:5000: name or service not known (DNS); "
        "check that it runs and the host:port is right"
    ]
    assert took < 5, f"{took:.1f} s: a name that does not resolve was retried"
