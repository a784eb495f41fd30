"""Output for pipes: stdout carries the data alone; notes for people go to stderr."""

from __future__ import annotations

from pathlib import Path

from trainops.registry import media
from trainops_testing.cli import run


def test_registry_ls_of_a_repository_prints_only_tags_on_stdout(tmp_path: Path) -> None:
    repo = f"file://{tmp_path}/reg/team/ckpt"
    src = tmp_path / "src"
    src.mkdir()
    (src / "w.bin").write_bytes(b"w")
    assert run("push", str(src), f"{repo}:step-1").code == 0
    record = f"{repo}:{media.PRUNED_TAG_PREFIX}step-0"  # what a prune leaves of a checkpoint
    assert run("registry", "tag", f"{repo}:step-1", record).code == 0
    for args in ((), ("-l",)):
        out = run("registry", "ls", repo, *args)
        assert out.code == 0, out.stderr
        listed = out.stdout.split() if not args else [line.split()[0] for line in out.stdout.splitlines()[2:]]
        assert listed == ["step-1"], out.stdout
        assert "(and 1 records of pruned checkpoints: --all lists them)" in out.stderr
    every = run("registry", "ls", repo, "--all")
    assert every.stdout.split() == [f"{media.PRUNED_TAG_PREFIX}step-0", "step-1"] and every.stderr == ""
