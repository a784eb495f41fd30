"""The checkpoint restore step and the checkpoint watcher, as the commands every target runs.

Restore (before training, on every start and restart):

    trainops ckpt pull --latest <REPO> <CKPT_DIR> [--node-rank auto|0 --nproc-per-node P --world-size W]

pulls the newest checkpoint of REPO into CKPT_DIR unless CKPT_DIR already holds one at
least as new, and exits 0 when the repository has none. A pod that knows its node rank (an
indexed template: TRAINOPS_NODE_RANK, JOB_COMPLETION_INDEX; a leader pod: 0) pulls only its
ranks' shards and the shared files, reusing what a node-local directory still holds. Watcher (beside the rank-0
process for the whole run):

    trainops ckpt watch <CKPT_DIR> --repository <REPO> --run-id <RUN_ID> --layout <layout>
        --keep-last N [--keep-best K --metric M --mode min|max] --until-signal [--leader-only]

pushes each complete checkpoint and, on SIGTERM, pushes what is left and exits.
`--leader-only` is for one pod template shared by every rank (batch/v1 Job): the watcher
idles unless TRAINOPS_NODE_RANK is 0. Each command gets `--insecure` when its registry is in
spec.insecureRegistries (an agent in a pod has no trainops.yaml to read it from).
"""

from __future__ import annotations

from trainops.errors import InputError
from trainops.manifest.stages import TrainSpec


def qualify(ref: str, registry: str) -> str:
    """A reference as an agent names it: scheme-qualified; short ones are under spec.registry."""
    if ref.startswith(("oci://", "s3://", "file://")):
        return ref
    return f"{registry.rstrip('/')}/{ref.lstrip('/')}"


def restore_steps(
    train: TrainSpec,
    repository: str,
    *,
    registry: str,
    insecure: frozenset[str] = frozenset(),
    node_rank: str | None = None,
) -> list[tuple[str, list[str]]]:
    """(container name, command) of the restore step; none when the manifest says resume: none.

    resume: latest — the newest checkpoint of the run's repository. resume: <ref> — that
    checkpoint first (`ckpt-seed`), then the newest of the repository if it is newer, so a
    restarted job continues from its own progress rather than from the seed again.

    node_rank: the pod's node rank ("auto": the scheduler's, from the pod's environment), so
    the pod restores only its ranks' shards (rank_argv); None: every file (a pod that
    restores for every node, on a shared volume, or one that cannot know its rank).
    """
    resume = train.checkpoint.resume
    if resume == "none":
        return []
    steps: list[tuple[str, list[str]]] = []
    if resume != "latest":
        seed = qualify(resume, registry)
        if "@" not in seed and ":" not in seed.split("://", 1)[-1].rsplit("/", 1)[-1]:
            raise InputError(
                f"train.checkpoint.resume {resume!r} names no checkpoint",
                hint="write REPOSITORY:step-N (or @sha256:…), latest, or none",
            )
        seeded = ["trainops", "ckpt", "pull", seed, train.checkpoint.dir, *rank_argv(train, node_rank)]
        steps.append(("ckpt-seed", with_insecure(seeded, insecure, seed)))
    restore = ["trainops", "ckpt", "pull", "--latest", repository, train.checkpoint.dir, *rank_argv(train, node_rank)]
    steps.append(("ckpt-restore", with_insecure(restore, insecure, repository)))
    return steps


def rank_argv(train: TrainSpec, node_rank: str | None) -> list[str]:
    """`--node-rank N --nproc-per-node P --world-size W` when the job's world is fixed and
    known (nodes × gpusPerNode, more than one rank); else nothing: every file."""
    if node_rank is None or train.elastic is not None or not train.gpus_per_node:
        return []
    world = train.nodes * train.gpus_per_node
    if world < 2:
        return []
    return ["--node-rank", node_rank, "--nproc-per-node", str(train.gpus_per_node), "--world-size", str(world)]


def with_insecure(argv: list[str], insecure: frozenset[str], *urls: str) -> list[str]:
    """argv plus --insecure when one of urls is on a registry in spec.insecureRegistries (plain HTTP)."""
    for url in urls:
        if url.startswith("oci://") and url[len("oci://") :].split("/", 1)[0] in insecure:
            return [*argv, "--insecure"]
    return argv


def watch_argv(
    train: TrainSpec, repository: str, run_id: str, *, leader_only: bool = False, insecure: frozenset[str] = frozenset()
) -> list[str]:
    ckpt = train.checkpoint
    argv = [
        "trainops",
        "ckpt",
        "watch",
        ckpt.dir,
        "--repository",
        repository,
        "--run-id",
        run_id,
        "--layout",
        ckpt.layout,
        "--keep-last",
        str(ckpt.keep.last),
    ]
    if ckpt.keep.best and ckpt.keep.metric:
        argv += ["--keep-best", str(ckpt.keep.best), "--metric", ckpt.keep.metric, "--mode", ckpt.keep.mode]
    if ckpt.dedup != "off":
        argv += ["--dedup", ckpt.dedup]
    argv.append("--until-signal")
    if leader_only:
        argv.append("--leader-only")
    return with_insecure(argv, insecure, repository)


def pull_argv(ref: str, dest: str, *, insecure: frozenset[str] = frozenset()) -> list[str]:
    """`trainops pull REF DEST`: a dataset into the directory it is mounted at."""
    return with_insecure(["trainops", "pull", ref, dest], insecure, ref)
