"""The train room chooses a run's target once (trainops.train.target.target_for), from the
run's own traces here (a Slurm run record, a local run's kept output) before the manifest's
scheduler; every target answers the same six verbs, refusing what it cannot do in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trainops import clock
from trainops.cluster.access import ClusterAccess
from trainops.errors import NotFoundError, UsageError
from trainops.faults.timeline import run_log_path
from trainops.manifest import Manifest, load_manifest
from trainops.slurm.record import RunRecord, write_record
from trainops.train.target import (
    KubernetesTarget,
    LocalTarget,
    SlurmTarget,
    WatchOptions,
    manifest_target,
    target_for,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "trainops.yaml")
    return tmp_path / "trainops.yaml"


def _record(manifest: Manifest, run_id: str) -> None:
    record = RunRecord(
        run_id=run_id, pipeline=manifest.pipeline.metadata.name, job_id="42", job_name="j", submitted=clock.iso()
    )
    write_record(manifest, record)


def _kept(manifest: Manifest, run_id: str, text: str) -> None:
    path = run_log_path(manifest, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_manifest_names_the_target_of_render_and_submit(project: Path) -> None:
    assert isinstance(manifest_target(load_manifest(project)), KubernetesTarget)  # volcano
    assert isinstance(manifest_target(load_manifest(project, env="dev")), LocalTarget)
    assert isinstance(manifest_target(load_manifest(project, env="slurm-local")), SlurmTarget)


def test_a_runs_own_traces_come_before_the_scheduler(project: Path) -> None:
    manifest = load_manifest(project)  # volcano
    access = ClusterAccess("/k/config")
    target = target_for(manifest, run_id="r-k8s", access=access)
    assert isinstance(target, KubernetesTarget) and target.access == access
    _record(manifest, "r-slurm")
    assert isinstance(target_for(manifest, run_id="r-slurm"), SlurmTarget)
    _kept(manifest, "r-local", "step 1\n")
    assert isinstance(target_for(manifest, run_id="r-local"), LocalTarget)
    # without RUN: runs submitted to Slurm from here, unless a cluster is named
    assert isinstance(target_for(manifest), SlurmTarget)
    assert isinstance(target_for(manifest, access=access), KubernetesTarget)


def test_a_local_run_gives_its_kept_output_and_refuses_what_it_cannot(project: Path) -> None:
    manifest = load_manifest(project, env="dev")
    target = target_for(manifest, run_id="r1")
    assert isinstance(target, LocalTarget)
    with pytest.raises(NotFoundError, match=r"the output of local run r1 is not kept here \(.*/logs/r1\.log\)"):
        target.logs("r1")
    _kept(manifest, "r1", "step 1\nstep 2")
    (part,) = target.logs("r1")
    assert part.text == "step 1\nstep 2" and part.source is None
    with pytest.raises(UsageError, match="run r1 runs locally: it is stopped where it runs"):
        target.cancel("r1")
    with pytest.raises(UsageError, match=r"train\.scheduler is local: `train watch` watches Kubernetes runs"):
        target.watch("r1", WatchOptions(once=True))


def test_a_local_run_under_a_cluster_manifest_says_so_when_watched(project: Path) -> None:
    manifest = load_manifest(project)  # volcano
    _kept(manifest, "r2", "x")
    with pytest.raises(UsageError, match="run r2 is a local run: `train watch` watches Kubernetes runs"):
        target_for(manifest, run_id="r2").watch("r2", WatchOptions(once=True))


def test_a_local_scheduler_has_nothing_to_render(project: Path) -> None:
    from trainops.errors import InputError

    with pytest.raises(InputError, match=r"train\.scheduler is local: there is nothing to render"):
        manifest_target(load_manifest(project, env="dev")).render(run_id="r3", image=None, insecure=False, out=None)
