"""Restoring a rank's share of a sharded checkpoint: which files each layout gives a rank,
a rank restoring exactly those from a real registry, a node-local copy with the same
digests not downloaded again, and a rank outside the world refused in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.checkpoint.dcp_format import write_dcp
from tests.checkpoint.helpers import blob, deepspeed_ckpt, watcher
from tests.registry.conftest import Target
from trainops.checkpoint import restore_latest
from trainops.checkpoint.shards import Ranks, requested, select
from trainops.errors import UsageError
from trainops.registry.context import Registries
from trainops_testing.cli import run
from trainops_testing.services import DistributionRegistry
from trainops_testing.tcp_proxy import TcpProxy

MEGATRON = [
    *(f"mp_rank_{tp:02d}_{pp:03d}/model_optim_rng.pt" for tp in range(2) for pp in range(2)),
    "config.json",
    "tokenizer/tokenizer.model",
]


def _files(paths: list[str], rank: int, world: int, metadata: bytes | None = None) -> list[str]:
    return select(paths, Ranks.of_process(rank, world), metadata).files


def test_megatron_rank_takes_its_tensor_and_pipeline_dir() -> None:
    # 8 ranks over tp=2 x pp=2: data parallel 2; order tp, dp, pp
    assert _files(MEGATRON, 0, 8) == ["config.json", "mp_rank_00_000/model_optim_rng.pt", "tokenizer/tokenizer.model"]
    assert _files(MEGATRON, 3, 8)[1] == "mp_rank_01_000/model_optim_rng.pt"  # tp 1, dp 1, pp 0
    assert _files(MEGATRON, 5, 8)[1] == "mp_rank_01_001/model_optim_rng.pt"  # tp 1, dp 0, pp 1
    plain = ["mp_rank_00/model_optim_rng.pt", "mp_rank_01/model_optim_rng.pt"]
    assert _files(plain, 1, 2) == ["mp_rank_01/model_optim_rng.pt"]
    resharded = select(MEGATRON, Ranks.of_process(0, 6))  # a restart on another world: every file
    assert resharded.files == sorted(MEGATRON) and "resharding" in resharded.note


def test_deepspeed_rank_takes_its_model_states_and_zero_partition() -> None:
    paths = [
        "mp_rank_00_model_states.pt",
        "mp_rank_01_model_states.pt",
        *(f"bf16_zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt" for dp in range(2) for mp in range(2)),
        "layer_01-model_00-model_states.pt",
        "zero_to_fp32.py",
    ]
    assert _files(paths, 3, 4) == [
        "bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt",
        "layer_01-model_00-model_states.pt",
        "mp_rank_01_model_states.pt",
        "zero_to_fp32.py",
    ]
    resharded = select(paths, Ranks.of_process(1, 8))  # 4 data ranks per model rank, 2 partitions saved
    assert [f for f in resharded.files if "zero_pp" in f] == [
        "bf16_zero_pp_rank_0_mp_rank_01_optim_states.pt",
        "bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt",
    ]
    assert "2 ZeRO partitions per model rank, not 4" in resharded.note


def test_dcp_by_its_metadata_plan(tmp_path: Path) -> None:
    sharded = write_dcp(tmp_path / "a", ranks=4, tensors=2, size=64)
    paths = [".metadata", *sharded.shards]
    metadata = (tmp_path / "a" / ".metadata").read_bytes()
    assert _files(paths, 2, 4, metadata) == [".metadata", "__2_0.distcp"]
    # a replicated tensor DCP saved once, in rank 1's file: every rank reads that file too
    write_dcp(tmp_path / "b", ranks=4, tensors=2, size=64, replicated_in=1)
    metadata = (tmp_path / "b" / ".metadata").read_bytes()
    chosen = select(paths, Ranks.of_process(2, 4), metadata)
    assert chosen.files == [".metadata", "__1_0.distcp", "__2_0.distcp"]
    assert "by .metadata" in chosen.note
    assert _files(paths, 2, 4, None) == sorted(paths)  # no plan read: every shard
    assert _files(paths, 2, 8, metadata) == sorted(paths)  # another world size: resharding
    assert _files(paths, 0, 4, b"not a pickle") == sorted(paths)


def test_unsharded_layouts_and_node_ranks() -> None:
    assert _files(["model.safetensors", "config.json"], 1, 2) == ["config.json", "model.safetensors"]
    node = select(MEGATRON, Ranks.of_node(1, 4, 8))  # ranks 4-7: tp 0/1 of pipeline stage 1
    assert node.ranks == [4, 5, 6, 7]
    assert [f for f in node.files if f.startswith("mp_")] == [
        "mp_rank_00_001/model_optim_rng.pt",
        "mp_rank_01_001/model_optim_rng.pt",
    ]


def test_bad_ranks_name_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match=r"^--rank 4 is outside the world of 4 ranks;"):
        requested(rank=4, node_rank=None, nproc_per_node=None, world_size=4)
    with pytest.raises(UsageError, match=r"^--node-rank 2 is outside the job's 2 node\(s\);"):
        requested(rank=None, node_rank="2", nproc_per_node=4, world_size=8)
    with pytest.raises(UsageError, match="--rank needs --world-size"):
        requested(rank=1, node_rank=None, nproc_per_node=None, world_size=None)
    monkeypatch.delenv("TRAINOPS_NODE_RANK", raising=False)
    monkeypatch.delenv("SLURM_NODEID", raising=False)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    assert requested(rank=None, node_rank="auto", nproc_per_node=2, world_size=4) == Ranks((2, 3), 4)
    monkeypatch.delenv("JOB_COMPLETION_INDEX")
    monkeypatch.setenv("VC_TASK_INDEX", "0")  # a Volcano worker task's first pod: node 1
    assert requested(rank=None, node_rank="auto+1", nproc_per_node=2, world_size=4) == Ranks((2, 3), 4)
    with pytest.raises(UsageError, match=r"^--node-rank 'auto-1' is not a node rank"):
        requested(rank=None, node_rank="auto-1", nproc_per_node=2, world_size=4)
    monkeypatch.delenv("VC_TASK_INDEX")
    assert requested(rank=None, node_rank="auto", nproc_per_node=2, world_size=4) is None  # every file


def _megatron_run(directory: Path, iteration: int) -> Path:
    path = directory / f"iter_{iteration:07d}"
    for tp in range(2):
        for pp in range(2):
            (path / f"mp_rank_{tp:02d}_{pp:03d}").mkdir(parents=True)
            (path / f"mp_rank_{tp:02d}_{pp:03d}" / "model_optim_rng.pt").write_bytes(blob())
    (path / "config.json").write_text('{"layers": 4}')
    (directory / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return path


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("target", ["oci"], indirect=True)
def test_a_rank_restores_exactly_its_files_and_reuses_a_local_copy(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    repo = registries.ref("team/mega")
    src = tmp_path / "train"
    _megatron_run(src, 100)
    watcher(registries, src, repo).scan()

    node = tmp_path / "node"
    first = restore_latest(registries, repository=repo, directory=node, ranks=Ranks.of_process(5, 8))
    assert first.path == node / "iter_0000100"
    assert _tree(first.path) == ["config.json", "mp_rank_01_001/model_optim_rng.pt"]
    assert (node / "latest_checkpointed_iteration.txt").read_text() == "100"
    assert first.bytes_received == sum((first.path / f).stat().st_size for f in _tree(first.path))
    shard = first.path / "mp_rank_01_001/model_optim_rng.pt"
    inode = shard.stat().st_ino

    # the pod restarts on the same node: its copy's digests match, nothing is downloaded
    again = restore_latest(registries, repository=repo, directory=node, ranks=Ranks.of_process(5, 8))
    assert (again.bytes_received, again.bytes_reused) == (0, first.bytes_received)
    assert shard.stat().st_ino == inode  # the very file, not a new download

    # a damaged local copy is not reused; another rank on a shared disk adds its own files
    shard.write_bytes(b"x" * shard.stat().st_size)
    other = restore_latest(registries, repository=repo, directory=node, ranks=Ranks.of_process(0, 8))
    assert other.bytes_received == (src / "iter_0000100/mp_rank_00_000/model_optim_rng.pt").stat().st_size
    shares = ["config.json", "mp_rank_00_000/model_optim_rng.pt", "mp_rank_01_001/model_optim_rng.pt"]
    assert _tree(first.path) == shares
    fixed = restore_latest(registries, repository=repo, directory=node, ranks=Ranks.of_process(5, 8))
    assert fixed.bytes_received == shard.stat().st_size
    assert shard.read_bytes() == (src / "iter_0000100/mp_rank_01_001/model_optim_rng.pt").read_bytes()

    # the watcher of the restored run does not push a rank's share back as a checkpoint
    events: list[str] = []
    watcher(registries, node, repo, on_event=lambda e: events.append(e.kind)).scan()
    assert "pushed" not in events


@pytest.mark.parametrize("target", ["oci"], indirect=True)
def test_dcp_and_deepspeed_ranks_from_a_registry(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    dcp_repo, ds_repo = registries.ref("team/dcp"), registries.ref("team/ds")
    write_dcp(tmp_path / "dcp" / "step-10", ranks=4, tensors=2, size=4096, replicated_in=3)
    watcher(registries, tmp_path / "dcp", dcp_repo, layout="dcp").scan()
    got = restore_latest(registries, repository=dcp_repo, directory=tmp_path / "n1", ranks=Ranks.of_process(1, 4))
    assert got.path is not None and got.selection is not None
    assert _tree(got.path) == [".metadata", "__1_0.distcp", "__3_0.distcp"]

    deepspeed_ckpt(tmp_path / "ds", 7, ranks=2)
    watcher(registries, tmp_path / "ds", ds_repo).scan()
    got = restore_latest(registries, repository=ds_repo, directory=tmp_path / "n2", ranks=Ranks.of_process(1, 2))
    assert got.path is not None
    assert _tree(got.path) == ["mp_rank_00_model_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    assert (tmp_path / "n2" / "latest").read_text() == "global_step7"


def test_cli_rank_outside_the_world_is_one_line(tmp_path: Path) -> None:
    out = run("ckpt", "pull", "--latest", f"file://{tmp_path}/reg/x", str(tmp_path / "d"), "--rank", "4",
              "--world-size", "4")  # fmt: skip
    assert out.code != 0
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.last_error_line.startswith("Error: --rank 4 is outside the world of 4 ranks")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("target", ["oci"], indirect=True)
def test_cli_pulls_a_node_share_as_json(target: Target, tmp_path: Path) -> None:
    repo = target.registries.ref("team/mega")
    _megatron_run(tmp_path / "train", 3)
    watcher(target.registries, tmp_path / "train", repo).scan()
    env = {"JOB_COMPLETION_INDEX": "1", "TRAINOPS_NODE_RANK": None}
    out = run("ckpt", "pull", "--latest", target.ref("team/mega"), str(tmp_path / "node"), "--node-rank", "auto",
              "--nproc-per-node", "2", "--world-size", "4", "--insecure", "-o", "json", env=env)  # fmt: skip
    assert out.code == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["selection"]["ranks"] == [2, 3]
    assert data["selection"]["files"] == [
        "config.json",
        "mp_rank_00_001/model_optim_rng.pt",
        "mp_rank_01_001/model_optim_rng.pt",
    ]
    assert _tree(tmp_path / "node" / "iter_0000003") == data["selection"]["files"]


def test_on_the_wire_a_rank_receives_its_share_and_then_nothing(registry: DistributionRegistry, tmp_path: Path) -> None:
    """Counted outside trainops: the bytes a TCP proxy in front of Distribution answers."""
    proxy = TcpProxy(registry.host)
    try:
        with Registries(insecure_registries=(proxy.host,)) as registries:
            repo = registries.ref(f"oci://{proxy.host}/wire/mega")
            src = tmp_path / "train"
            path = _megatron_run(src, 100)
            for shard in path.glob("mp_rank_*/model_optim_rng.pt"):
                shard.write_bytes(os.urandom(1024 * 1024))  # 4 MiB in all, 1 MiB a rank
            watcher(registries, src, repo).scan()
            before = proxy.sent_down
            restore_latest(registries, repository=repo, directory=tmp_path / "node", ranks=Ranks.of_process(2, 8))
            first = proxy.sent_down - before
            assert 1024 * 1024 < first < 1.5 * 1024 * 1024  # one shard, not four
            before = proxy.sent_down
            restore_latest(registries, repository=repo, directory=tmp_path / "node", ranks=Ranks.of_process(2, 8))
            assert proxy.sent_down - before < 64 * 1024  # manifests only: the node's copy is reused
    finally:
        proxy.close()


@pytest.mark.parametrize("target", ["oci"], indirect=True)
def test_a_whole_restore_completes_a_rank_share(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    repo = registries.ref("team/mega")
    _megatron_run(tmp_path / "train", 100)
    watcher(registries, tmp_path / "train", repo).scan()
    node = tmp_path / "node"
    share = restore_latest(registries, repository=repo, directory=node, ranks=Ranks.of_process(0, 8))
    assert share.path is not None and len(_tree(share.path)) == 2
    whole = restore_latest(registries, repository=repo, directory=node)  # not "at least as new": a share
    assert whole.path == share.path and _tree(share.path) == _tree(tmp_path / "train" / "iter_0000100")
    mine = share.path / "mp_rank_00_000/model_optim_rng.pt"
    assert whole.bytes_reused == mine.stat().st_size + len('{"layers": 4}')  # the share's two files
    again = restore_latest(registries, repository=repo, directory=node)
    assert again.restored is None and "nothing pulled" in again.reason
