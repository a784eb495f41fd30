"""PyTorch Distributed Checkpoint directories (torchtitan's step-N/): complete only when
`.metadata` — written last — exists and every shard it names holds the bytes it needs;
pushed and restored like the other layouts. Test data: tests/checkpoint/dcp_format.py."""

from __future__ import annotations

import filecmp
import os
import pickle
from pathlib import Path

from tests.checkpoint.dcp_format import write_dcp
from tests.checkpoint.helpers import watcher
from trainops.checkpoint import restore_latest
from trainops.checkpoint.layouts import detect_layout, get_layout
from trainops.checkpoint.layouts.dcp import storage_extents
from trainops.registry.context import Registries


def _committed(directory: Path) -> list[str]:
    return [f.name for f in get_layout("dcp").listing(directory).found if f.committed]


def test_auto_detects_dcp_step_directories(tmp_path: Path) -> None:
    write_dcp(tmp_path / "step-10")
    layout = detect_layout(tmp_path)
    assert layout is not None and layout.name == "dcp"


def test_complete_only_with_metadata_and_every_shard_whole(tmp_path: Path) -> None:
    write_dcp(tmp_path / "step-10")
    write_dcp(tmp_path / "step-20", metadata=False)  # ranks done, coordinator not yet
    short = write_dcp(tmp_path / "step-30")
    shard = next(iter(short.shards))
    with (tmp_path / "step-30" / shard).open("r+b") as fh:  # a shard cut short (a torn copy)
        fh.truncate(short.shards[shard] - 1)
    missing = write_dcp(tmp_path / "step-40")
    os.unlink(tmp_path / "step-40" / next(iter(missing.shards)))
    (tmp_path / "step-50").mkdir()
    (tmp_path / "step-50" / ".metadata").write_bytes(b"\x80\x05torn")
    assert _committed(tmp_path) == ["step-10"]
    listing = get_layout("dcp").listing(tmp_path)
    assert [f.step for f in listing.found] == [10, 20, 30, 40, 50] and listing.writing


def test_a_metadata_file_that_would_run_code_is_refused(tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    assert storage_extents(pickle.dumps(Evil())) is None
    assert not (tmp_path / "pwned").exists()


def test_push_and_restore_a_dcp_checkpoint(tmp_path: Path) -> None:
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    repo = registries.ref("team/ckpt")
    src = tmp_path / "train"
    write_dcp(src / "step-100")
    write_dcp(src / "step-200", ranks=4)
    write_dcp(src / "step-300", metadata=False)  # never pushed: incomplete
    pushed = watcher(registries, src, repo, layout="dcp").scan(final=True)
    assert sorted(p.step for p in pushed) == [100, 200]
    dest = tmp_path / "resume"
    result = restore_latest(registries, repository=repo, directory=dest, layout="dcp")
    assert result.restored is not None and result.restored.step == 200
    names = sorted(p.name for p in (src / "step-200").iterdir())
    assert sorted(p.name for p in (dest / "step-200").iterdir()) == names
    _, mismatch, errors = filecmp.cmpfiles(src / "step-200", dest / "step-200", names, shallow=False)
    assert not mismatch and not errors
    assert _committed(dest) == ["step-200"]
