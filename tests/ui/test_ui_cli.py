"""`trainops ui`: refuses an open address without a token; serves the index it builds."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from trainops.registry.context import Registries
from trainops_testing import interrupting
from trainops_testing.cli import REPO, run
from trainops_testing.services import free_port, wait_for
from ui.helpers import fill


def test_open_address_needs_a_token(tmp_path: Path) -> None:
    out = run("ui", "--registry", f"file://{tmp_path}", "--host", "0.0.0.0", env={"TRAINOPS_UI_TOKEN": None})
    assert out.code == 2
    assert "not a loopback address" in out.last_error_line and "--token" in out.last_error_line


def test_no_registry_and_no_manifest_is_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no trainops.yaml here or above: the same exit code as every command's
    out = run("ui")
    assert out.code == 4 and "no registry to browse" in out.last_error_line


def test_serves_what_it_indexed(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'registry'}"
    with Registries(default_registry=url) as registries:
        filled = fill(registries, url, tmp_path / "work")
    port = free_port()
    env = {**os.environ, "TRAINOPS_CACHE_DIR": str(tmp_path / "cache")}
    log = (tmp_path / "ui.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops.cli.main", "ui", "--registry", url, "--port", str(port), "--refresh", "0"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        with urllib.request.urlopen(base + "/api/repositories", timeout=5) as resp:
            return bool(resp.status == 200)

    try:
        wait_for(up, timeout=60, what="trainops ui", proc=proc, log_path=tmp_path / "ui.log")
        with urllib.request.urlopen(base + "/api/repositories", timeout=5) as resp:
            repos = [r["url"] for r in json.load(resp)["repositories"]]
        assert filled.repo("tiny/checkpoints") in repos and len(repos) == 5
        assert (tmp_path / "cache" / "ui").is_dir()  # the index lives in trainops' cache
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
    assert "indexed 5 repositories" in (tmp_path / "ui.log").read_text()


def test_port_zero_serves_where_it_says_and_a_taken_port_is_one_line(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'registry'}"
    with Registries(default_registry=url) as registries:
        fill(registries, url, tmp_path / "work")
    env = {**os.environ, "TRAINOPS_CACHE_DIR": str(tmp_path / "cache")}
    log_path = tmp_path / "ui.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(  # SIGINT as a terminal delivers it, even when this runs in the background
        interrupting.command("ui", "--registry", url, "--port", "0", "--refresh", "0"),
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    said: list[str] = []

    def serving() -> bool:
        said[:] = re.findall(r"serving http://127\.0\.0\.1:(\d+)/ ", log_path.read_text())
        return bool(said)

    try:
        wait_for(serving, timeout=60, what="trainops ui saying its port", proc=proc, log_path=log_path)
        port = int(said[0])
        assert port != 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/repositories", timeout=5) as resp:
            assert len(json.load(resp)["repositories"]) == 5
        taken = run(
            "ui",
            "--registry",
            url,
            "--port",
            str(port),
            "--refresh",
            "0",
            env={"TRAINOPS_CACHE_DIR": str(tmp_path / "cache")},
        )
        assert taken.code == 2, taken.stderr
        assert f"cannot listen on 127.0.0.1:{port}" in taken.last_error_line and "--port" in taken.last_error_line
        assert "Traceback" not in taken.stderr
        proc.send_signal(signal.SIGINT)  # Ctrl-C stops it with the exit code every command has for it
        assert proc.wait(timeout=20) == 130
        assert "Traceback" not in log_path.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
