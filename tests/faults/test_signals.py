"""The reading of evidence, the action table, the manifest section and ETTR's arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.errors import ManifestError
from trainops.faults.actions import DEFAULT_ACTIONS, action_for
from trainops.faults.ettr import compute
from trainops.faults.signals import FAULT_CLASSES, XID_TABLE, classify_line, metrics_line, most_specific, nan_signal
from trainops.faults.timeline import Mark, Segment, Timeline
from trainops.manifest import load_manifest


@pytest.mark.parametrize(
    ("line", "source", "fault"),
    [
        ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "node-health", "fell-off-bus"),
        ("NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception", "node-health", "xid-application"),
        ("NVRM: Xid (PCI:0000:3b:00): 74, pid=1, NVLink: fatal error", "node-health", "nvlink"),
        ("NVRM: Xid (PCI:0000:3b:00): 63, pid=1, Row Remapper", "node-health", "row-remap-pending"),
        ("NVRM: Xid (PCI:0000:3b:00): 95, pid=1, Uncontained", "node-health", "ecc-uncorrectable"),
        ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)", "trainer", "nccl-timeout"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "trainer", "cuda-oom"),
        ("OSError: [Errno 28] No space left on device: '/ckpt/step-100/model.pt'", "trainer", "storage-error"),
        ("Fatal Python error: Segmentation fault", "trainer", "segfault"),
        ("srun: error: node7: task 3: Killed", "trainer", "node-lost"),
    ],
)
def test_lines_are_classified(line: str, source: str, fault: str) -> None:
    found = classify_line(line, source=source, node="n1")  # type: ignore[arg-type]
    assert found is not None and found.fault == fault


def test_ordinary_lines_and_unknown_xids_are_not_faults() -> None:
    assert classify_line("step 100 loss 1.93", source="trainer") is None
    assert classify_line("NVRM: Xid (PCI:0000:3b:00): 999, pid=1", source="node-health") is None


def test_node_of_a_lost_task_comes_from_srun() -> None:
    found = classify_line("srun: error: gpu-17: task 0: Killed", source="trainer", node="head")
    assert found is not None and found.node == "gpu-17"


def test_nan_loss_from_a_metrics_line() -> None:
    line = '{"step":300,"train_loss":NaN,"val_loss":2.1}'
    progress = metrics_line(line)
    assert progress is not None and progress.step == 300
    found = nan_signal(progress, line, node=None)
    assert found is not None and found.fault == "nan-loss"
    finite = metrics_line('{"step":400,"train_loss":1.5}')
    assert finite is not None and nan_signal(finite, "", node=None) is None


def test_the_cause_outranks_its_symptoms() -> None:
    xid = classify_line("NVRM: Xid (PCI:0): 79, pid=1", source="node-health")
    nccl = classify_line("Watchdog caught collective operation timeout", source="trainer")
    assert xid is not None and nccl is not None
    assert most_specific([nccl, xid]) == xid


def test_every_class_has_a_default_action_and_every_xid_a_class() -> None:
    assert set(DEFAULT_ACTIONS) == set(FAULT_CLASSES)
    assert {x.fault for x in XID_TABLE.values()} <= set(FAULT_CLASSES)
    assert action_for("cuda-oom", None) == "stop" and action_for("fell-off-bus", None) == "drain"


def test_an_unknown_fault_class_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "trainops.yaml"
    path.write_text(
        "apiVersion: trainops.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: x}\nspec:\n"
        '  registry: file://reg\n  train:\n    scheduler: local\n    command: ["true"]\n'
        "    faults:\n      actions:\n        gpu-on-fire: stop\n"
    )
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    problems = [str(p) for p in caught.value.problems]
    assert len(problems) == 1 and ":11:9: spec.train.faults.actions.gpu-on-fire" in problems[0], problems


def _segment(started: str, first: tuple[int, str], last: tuple[int, str], ended: str, resumed: int | None) -> Segment:
    return Segment(
        started=started,
        first=Mark(step=first[0], at=first[1]),
        last=Mark(step=last[0], at=last[1]),
        ended=ended,
        resumed_step=resumed,
    )


def test_ettr_counts_the_restart_gap_and_the_recomputed_steps() -> None:
    day = "2026-12-04T10:"
    line = Timeline(
        pipeline="p",
        run_id="r",
        segments=[
            # 1 s per step: steps 0..100 in 100 s, failure at step 100, newest checkpoint 80
            _segment(day + "00:00Z", (10, day + "00:10Z"), (100, day + "01:40Z"), day + "01:45Z", None),
            # back at 02:00 at step 80, first report at step 90 (10 s of steps), done at 200
            _segment(day + "01:50Z", (90, day + "02:10Z"), (200, day + "04:00Z"), day + "04:00Z", 80),
        ],
    )
    result = compute(line, [])
    assert result.wall_seconds == 240
    assert result.recompute_lost_seconds == pytest.approx(20)  # steps 80..100 done twice
    assert result.restart_lost_seconds == pytest.approx(20)  # 01:40 → 02:10 minus the 10 s of steps 80..90
    assert result.ettr == pytest.approx(200 / 240, abs=1e-3)
