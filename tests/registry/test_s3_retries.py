"""S3 retries go through trainops.retry: each is a WARNING with its reason and wait."""

from __future__ import annotations

import os
from pathlib import Path

from tests.registry.proxy import FaultProxy
from trainops_testing.cli import run_subprocess


def test_s3_throttling_is_retried_visibly(s3_server: object, s3_bucket: str, tmp_path: Path) -> None:
    upstream = s3_server.endpoint_url.split("://", 1)[1]  # type: ignore[attr-defined]
    (tmp_path / "f").write_bytes(os.urandom(1000))
    with FaultProxy(upstream) as proxy:
        env = {"AWS_ENDPOINT_URL": f"http://{proxy.host}"}
        proxy.fail_status, proxy.retry_after, proxy.fail_next = 503, "0", 2
        out = run_subprocess(["push", str(tmp_path / "f"), f"s3://{s3_bucket}/retry/x:v1"], env=env, cwd=tmp_path)
        assert out.code == 0, out.stderr
        retries = [line for line in out.stderr.splitlines() if line.startswith("WARNING: S3 ")]
        assert len(retries) == 2, out.stderr
        assert "failed (503" in retries[0] and "retry 1 of 5 in 0.0 s (Retry-After)" in retries[0]
        assert proxy.failures_served == 2


def test_s3_gives_up_within_the_budget(s3_server: object, s3_bucket: str, tmp_path: Path) -> None:
    upstream = s3_server.endpoint_url.split("://", 1)[1]  # type: ignore[attr-defined]
    (tmp_path / "f").write_bytes(b"x")
    with FaultProxy(upstream) as proxy:
        proxy.fail_next = 1000
        env = {"AWS_ENDPOINT_URL": f"http://{proxy.host}", "TRAINOPS_RETRY_BUDGET": "0.3"}
        out = run_subprocess(["push", str(tmp_path / "f"), f"s3://{s3_bucket}/retry/y:v1"], env=env, cwd=tmp_path)
    assert out.code == 6, out.stderr
    assert sum(line.startswith("WARNING: S3 ") for line in out.stderr.splitlines()) >= 1
    assert out.last_error_line.startswith("Error: ")
