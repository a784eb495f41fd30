"""Checkpoint tests: the registry fixtures of tests/registry (one registry per scheme, an
isolated digest cache), and no TRAINOPS_* variables leaking in from the shell."""

from __future__ import annotations

import pytest

from tests.registry.conftest import _isolated_cache, target

__all__ = ["_isolated_cache", "target"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "TRAINOPS_DEBUG",
        "TRAINOPS_CKPT_REPOSITORY",
        "TRAINOPS_RUN_ID",
        "TRAINOPS_IMAGE_DIGEST",
        "TRAINOPS_NODE_RANK",
        "TRAINOPS_PIPELINE",
        "TRAINOPS_GIT_COMMIT",
        "SOURCE_DATE_EPOCH",
    ):
        monkeypatch.delenv(name, raising=False)
