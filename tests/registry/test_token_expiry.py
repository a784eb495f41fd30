"""Bearer tokens that expire in the middle of a transfer (Distribution with `auth: token`).

The token service issues JWTs that the registry refuses a couple of seconds after they were
issued, so a 256 MiB push and pull outlive several tokens, as a 100 GB checkpoint outlives
Harbor's 30-minute ones. trainops must fetch fresh tokens and finish, every byte verified.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest

from trainops_testing import planted
from trainops_testing.services import DistributionRegistry
from trainops_testing.token_issuer import TokenIssuer

PASSWORD = planted.secret("token-service-password")

MiB = 1024 * 1024


def _registry(tmp_path: Path, lifetime: float, advertised: float | None) -> tuple[DistributionRegistry, TokenIssuer]:
    issuer = TokenIssuer(tmp_path / "issuer", lifetime=lifetime, advertised=advertised, user="alice", password=PASSWORD)
    issuer.start()
    reg = DistributionRegistry(tmp_path / "data", auth_config=issuer.registry_auth_config())
    try:
        reg.start()
    except BaseException:
        issuer.stop()
        raise
    return reg, issuer


def _login(tmp_path: Path, host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    planted.source(config / "config.json")
    monkeypatch.setenv("DOCKER_CONFIG", str(config))


def _tree(root: Path) -> Path:
    """256 MiB: one 192 MiB file (one long upload) and 16 files of 4 MiB (many requests)."""
    root.mkdir()
    with (root / "model.safetensors").open("wb") as out:
        for _ in range(192):
            out.write(os.urandom(MiB))
    for i in range(16):
        (root / f"shard-{i:02d}.bin").write_bytes(os.urandom(4 * MiB))
    return root


@pytest.mark.slow
@pytest.mark.parametrize(
    ("advertised", "how"),
    [
        (None, "renewed before it expires (expires_in honoured)"),
        (3600.0, "refused mid-transfer (the service over-states the life): renewed on the 401, transfer resumed"),
    ],
)
def test_push_and_pull_outlive_expiring_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, advertised: float | None, how: str
) -> None:
    from trainops.registry import pulling, store
    from trainops.registry.context import Registries

    reg, issuer = _registry(tmp_path, 2.0, advertised)
    try:
        _login(tmp_path, reg.host, monkeypatch)
        registries = Registries(default_registry=f"oci://{reg.host}/exp", insecure_registries=(reg.host,))
        source = _tree(tmp_path / "src")
        ref = registries.ref("ckpt:step-1")

        pushed = store.push(registries, source=source, ref=ref, jobs=2)
        pushed_tokens = len(issuer.requests)
        # The pull starts once the push's last token has expired (the registry refuses it by
        # now), so it must get a new one, however quickly it runs.
        last = issuer.requests[-1].at
        while time.time() < last + issuer.lifetime:
            time.sleep(0.05)
        pulled = pulling.pull(registries, ref=ref, dest=tmp_path / "out", jobs=2)
    finally:
        reg.stop()
        issuer.stop()

    assert pulled.digest == pushed.digest, how
    for path in source.iterdir():
        assert (tmp_path / "out" / path.name).read_bytes() == path.read_bytes()
    # The transfers outlived a token, so fresh ones were fetched on the way.
    assert pushed_tokens >= 2, how
    assert len(issuer.requests) > pushed_tokens, how
    assert all(r.user == "alice" for r in issuer.requests)
