"""Which files of a sharded checkpoint one rank reads on restore: its own shards plus the
shared files (configs, metadata, tokenizer, anything no rank owns).

Recognised by file naming, inside the checkpoint directory (the artifact's paths):

- Megatron-LM: `mp_rank_TT/` or `mp_rank_TT_PPP/` (tensor rank TT, pipeline rank PPP). Global
  rank r of world W, in Megatron's default order (tensor fastest, then data, then pipeline;
  no context or expert parallelism): tp = r mod TP, pp = r div (W / PP).
- DeepSpeed: `mp_rank_MM_model_states.pt` and `[bf16_]zero_pp_rank_D_mp_rank_MM_*` (model rank
  fastest, then data; no pipeline topology): mp = r mod MP, dp = r div MP. A world whose data
  parallel size differs from the checkpoint's takes every ZeRO partition of its model rank
  (a resharded load reads them all).
- PyTorch DCP (`__R_N.distcp`, and Megatron's torch_dist format): rank r's own files, plus the
  files `.metadata` says hold an item every rank reads whole (a tensor stored as one chunk,
  or bytes: DCP's save writes a replicated item once, in one rank's file). `.metadata` is read
  without torch (layouts.dcp's restricted reader). Without a readable `.metadata`, or in a
  world of another size than the writers' (resharding), a rank takes every shard.

Any other layout (the trainops one, Hugging Face's) has no per-rank files: every rank takes
every file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainops import podenv
from trainops.checkpoint.layouts.dcp import METADATA, Stub, load_metadata
from trainops.errors import UsageError

MEGATRON = re.compile(r"^mp_rank_([0-9]+)(?:_([0-9]+))?/")
DEEPSPEED_MODEL = re.compile(r"^mp_rank_([0-9]+)_model_states\.pt$")
DEEPSPEED_ZERO = re.compile(r"^(?:[a-z0-9]+_)?zero_pp_rank_([0-9]+)_mp_rank_([0-9]+)_")
DCP_SHARD = re.compile(r"^(?:.*/)?__([0-9]+)_([0-9]+)\.distcp$")


@dataclass(frozen=True)
class Selection:
    """The files some ranks read, and how they were chosen."""

    ranks: list[int]  # whose files these are (one process, or a node's)
    world_size: int
    sharding: str  # megatron, deepspeed, dcp, or none
    files: list[str]
    shared: int  # how many of files no rank owns
    note: str  # how the choice was made


@dataclass(frozen=True)
class Ranks:
    """The ranks a restore is for: one process's (--rank), or a node's (--node-rank: its
    nproc_per_node consecutive ranks), of world_size."""

    ranks: tuple[int, ...]
    world_size: int

    @classmethod
    def of_process(cls, rank: int, world_size: int) -> Ranks:
        _check_world(world_size)
        if not 0 <= rank < world_size:
            raise UsageError(
                f"--rank {rank} is outside the world of {world_size} ranks",
                hint=f"pass --rank from 0 to {world_size - 1} (or the job's --world-size)",
            )
        return cls((rank,), world_size)

    @classmethod
    def of_node(cls, node_rank: int, nproc_per_node: int, world_size: int) -> Ranks:
        _check_world(world_size)
        if nproc_per_node < 1 or world_size % nproc_per_node:
            raise UsageError(
                f"--nproc-per-node {nproc_per_node} does not divide --world-size {world_size}",
                hint="pass the processes per node and the job's world size",
            )
        nodes = world_size // nproc_per_node
        if not 0 <= node_rank < nodes:
            raise UsageError(
                f"--node-rank {node_rank} is outside the job's {nodes} node(s)",
                hint=f"pass --node-rank from 0 to {nodes - 1}",
            )
        first = node_rank * nproc_per_node
        return cls(tuple(range(first, first + nproc_per_node)), world_size)


def requested(
    *, rank: int | None, node_rank: str | None, nproc_per_node: int | None, world_size: int | None
) -> Ranks | None:
    """The ranks the restore options name (None: every file). --node-rank auto is the
    scheduler's (podenv.scheduler_node_rank), auto+K that plus K (a worker group indexed
    after the leader); without one, every file."""
    if rank is None and node_rank is None:
        if world_size is not None or nproc_per_node is not None:
            raise UsageError("--world-size and --nproc-per-node need --rank or --node-rank")
        return None
    if rank is not None and node_rank is not None:
        raise UsageError(
            "--rank and --node-rank exclude each other", hint="--rank for one process, --node-rank for a node"
        )
    if world_size is None:
        raise UsageError(
            f"--{'rank' if rank is not None else 'node-rank'} needs --world-size", hint="pass the job's world size"
        )
    if rank is not None:
        return Ranks.of_process(rank, world_size)
    if node_rank is not None and node_rank.startswith("auto"):
        offset = node_rank[len("auto") :]
        if offset and not (offset[0] == "+" and offset[1:].isdigit()):
            raise UsageError(f"--node-rank {node_rank!r} is not a node rank", hint="pass a number, auto or auto+K")
        found = podenv.scheduler_node_rank()
        if found is None:
            return None
        return Ranks.of_node(found + int(offset[1:] or 0), nproc_per_node or 1, world_size)
    if not (node_rank or "").isdigit():
        raise UsageError(f"--node-rank {node_rank!r} is not a node rank", hint="pass a number, auto or auto+K")
    return Ranks.of_node(int(node_rank or 0), nproc_per_node or 1, world_size)


def _check_world(world_size: int) -> None:
    if world_size < 1:
        raise UsageError(f"--world-size {world_size} is not a number of ranks", hint="pass --world-size 1 or more")


def select(paths: Sequence[str], ranks: Ranks, metadata: bytes | None = None) -> Selection:
    """The files of paths that ranks restore: the union of each rank's.

    metadata: the checkpoint's DCP `.metadata`, when it has one and the caller read it."""
    chosen = [select_one(paths, rank, ranks.world_size, metadata) for rank in ranks.ranks]
    if len(chosen) == 1:
        return chosen[0]
    files = sorted({f for c in chosen for f in c.files})
    note = f"ranks {ranks.ranks[0]}-{ranks.ranks[-1]}: " + "; ".join(dict.fromkeys(c.note for c in chosen))
    return Selection(list(ranks.ranks), ranks.world_size, chosen[0].sharding, files, chosen[0].shared, note)


def select_one(paths: Sequence[str], rank: int, world_size: int, metadata: bytes | None = None) -> Selection:
    """The files of paths that rank (of world_size ranks) restores."""
    Ranks.of_process(rank, world_size)
    if any(MEGATRON.match(p) for p in paths):
        return _megatron(paths, rank, world_size)
    if any(DEEPSPEED_MODEL.match(p.rsplit("/", 1)[-1]) or DEEPSPEED_ZERO.match(p.rsplit("/", 1)[-1]) for p in paths):
        return _deepspeed(paths, rank, world_size)
    if any(DCP_SHARD.match(p) for p in paths):
        return _dcp(paths, rank, world_size, metadata)
    return Selection([rank], world_size, "none", sorted(paths), len(paths), "no per-rank files: every file")


def _owned(
    paths: Sequence[str], owner: Mapping[str, object], wanted: object, rank: int, world: int, kind: str, note: str
) -> Selection:
    """Files no rank owns, and those owner says wanted owns."""
    shared = [p for p in paths if p not in owner]
    mine = [p for p in paths if p in owner and owner[p] == wanted]
    return Selection([rank], world, kind, sorted([*mine, *shared]), len(shared), note)


def _megatron(paths: Sequence[str], rank: int, world: int) -> Selection:
    owner: dict[str, tuple[int, int]] = {}
    for p in paths:
        m = MEGATRON.match(p)
        if m:
            owner[p] = (int(m.group(1)), int(m.group(2) or 0))
    tp_size = 1 + max(tp for tp, _ in owner.values())
    pp_size = 1 + max(pp for _, pp in owner.values())
    if world % (tp_size * pp_size):
        note = f"a world of {world} does not fit {tp_size} tensor × {pp_size} pipeline ranks (resharding): every file"
        return Selection([rank], world, "megatron", sorted(paths), len(paths) - len(owner), note)
    tp, pp = rank % tp_size, rank // (world // pp_size)
    note = f"tensor rank {tp} of {tp_size}, pipeline rank {pp} of {pp_size} (Megatron's tp-dp-pp order)"
    return _owned(paths, owner, (tp, pp), rank, world, "megatron", note)


def _deepspeed(paths: Sequence[str], rank: int, world: int) -> Selection:
    models: dict[str, int] = {}
    zero: dict[str, tuple[int, int]] = {}
    for p in paths:
        name = p.rsplit("/", 1)[-1]
        if m := DEEPSPEED_MODEL.match(name):
            models[p] = int(m.group(1))
        elif m := DEEPSPEED_ZERO.match(name):
            zero[p] = (int(m.group(1)), int(m.group(2)))
    mp_size = 1 + max([*models.values(), *(mp for _, mp in zero.values())])
    if world % mp_size:
        note = f"a world of {world} is not a multiple of {mp_size} model-parallel ranks (resharding): every file"
        return Selection([rank], world, "deepspeed", sorted(paths), len(paths) - len(models) - len(zero), note)
    mp, dp = rank % mp_size, rank // mp_size
    dp_size = 1 + max((d for d, _ in zero.values()), default=0)
    resharded = bool(zero) and dp_size != world // mp_size
    shared = [p for p in paths if p not in models and p not in zero]
    mine = [p for p, m in models.items() if m == mp]
    mine += [p for p, (d, m) in zero.items() if m == mp and (resharded or d == dp)]
    note = f"model rank {mp} of {mp_size}, data rank {dp}"
    if resharded:
        note += f"; the checkpoint has {dp_size} ZeRO partitions per model rank, not {world // mp_size}: all of them"
    return Selection([rank], world, "deepspeed", sorted([*mine, *shared]), len(shared), note)


def _dcp(paths: Sequence[str], rank: int, world: int, metadata: bytes | None) -> Selection:
    owner = {p: int(m.group(1)) for p in paths if (m := DCP_SHARD.match(p))}
    writers = len(set(owner.values()))
    if writers != world:
        note = f"written by {writers} ranks, restored by {world}: resharding reads every shard"
        return Selection([rank], world, "dcp", sorted(paths), len(paths) - len(owner), note)
    whole = _whole_item_files(metadata) if metadata is not None else None
    if whole is None:
        why = "no .metadata" if metadata is None else "a .metadata this reader does not understand"
        return Selection([rank], world, "dcp", sorted(paths), len(paths) - len(owner), f"{why}: every shard")
    prefix = {p.rsplit("/", 1)[0] + "/" if "/" in p else "" for p in paths if p.endswith(METADATA)}
    wanted = {f"{d}{name}" for d in prefix or {""} for name in whole}
    selection = _owned(paths, owner, rank, rank, world, "dcp", "")
    files = sorted({*selection.files, *(p for p in owner if p in wanted)})
    note = f"rank {rank}'s shards and the {len(set(files) - set(selection.files))} other(s) holding whole items"
    return Selection([rank], world, "dcp", files, selection.shared, note + " (by .metadata)")


def _whole_item_files(metadata: bytes) -> set[str] | None:
    """The shard files holding an item every rank loads whole: a tensor of one chunk, or
    bytes. None when the metadata cannot be read."""
    root = load_metadata(metadata)
    if root is None:
        return None
    items = root.state.get("state_dict_metadata")
    storage = root.state.get("storage_data")
    if not isinstance(items, dict) or not isinstance(storage, dict):
        return None
    whole: set[str] = set()
    for index, info in storage.items():
        fqn = index.state.get("fqn") if isinstance(index, Stub) else None
        path = info.state.get("relative_path") if isinstance(info, Stub) else None
        if not isinstance(fqn, str) or not isinstance(path, str):
            return None
        item = items.get(fqn)
        chunks = item.state.get("chunks") if isinstance(item, Stub) else None
        if not isinstance(chunks, list) or len(chunks) <= 1:  # bytes, or a tensor stored whole
            whole.add(path)
    return whole
