"""Slurm: an sbatch script (templates/slurm/sbatch.sh.j2) whose setup lines (train.slurm.setup)
prepare the batch host, then `exec trainops train run --slurm`, the supervisor of
trainops.train.slurm_run: it restores the newest checkpoint, starts the training on every node
with srun, pushes each complete checkpoint, detects hangs and faults, and requeues on the
time-limit signal. Under pyxis/enroot (train.slurm.runtime pyxis, the default) the script
passes `--image` (the image pinned by digest) and the supervisor puts the container options
on that srun; with runtime bare-metal no container is run.

Every value from the manifest that reaches the shell is quoted with shlex.quote, and
`#SBATCH` values (which sbatch reads itself) are limited to characters that cannot end the
directive, so no manifest value can run a command.
"""

from __future__ import annotations

import re
import shlex

from trainops.errors import InputError
from trainops.manifest.common import duration_seconds
from trainops.render.context import RunContext
from trainops.render.env import check_names
from trainops.render.names import object_name
from trainops.render.quantity import mebibytes, whole_cpus
from trainops.templating import render_template

TEMPLATE = "slurm/sbatch.sh.j2"
_DIRECTIVE_SAFE = re.compile(r"^[A-Za-z0-9_.,:@%+=/\[\]|&*()!-]+$")
_MOUNT_UNSAFE = re.compile(r"[,:\s]")
MAX_SIGNAL_SECONDS = 65535


def _directive(field_name: str, value: str) -> str:
    if not _DIRECTIVE_SAFE.match(value):
        raise InputError(
            f"{field_name} {value!r} cannot be written as an #SBATCH option",
            hint="use letters, digits and . , : @ % + = / [ ] | & * ( ) ! - only (no spaces, quotes or newlines)",
        )
    return value


def _mount_path(field_name: str, value: str) -> str:
    if _MOUNT_UNSAFE.search(value):
        raise InputError(
            f"{field_name} {value!r} cannot be an enroot mount", hint="use a path without ',', ':' or spaces"
        )
    return value


def _directives(ctx: RunContext, name: str) -> list[str]:
    train = ctx.train
    opts = train.slurm
    out = [f"--job-name={name}", f"--nodes={train.nodes}", "--ntasks-per-node=1"]
    if train.gpus_per_node:
        out.append(f"--gpus-per-node={train.gpus_per_node}")
    if train.resources.cpu is not None:
        out.append(f"--cpus-per-task={whole_cpus(train.resources.cpu)}")
    if train.resources.memory is not None:
        out.append(f"--mem={mebibytes(train.resources.memory)}M")
    partition = (opts.partition if opts else None) or train.queue
    if partition:
        source = "train.slurm.partition" if opts and opts.partition else "train.queue"
        out.append(f"--partition={_directive(source, partition)}")
    if opts is not None:
        for key, value in (
            ("account", opts.account),
            ("qos", opts.qos),
            ("time", opts.time),
            ("constraint", opts.constraint),
        ):
            if value:
                out.append(f"--{key}={_directive(f'train.slurm.{key}', value)}")
    if opts is None or opts.exclusive:
        out.append("--exclusive")
    grace = int(duration_seconds(train.checkpoint.grace_period))
    out += [
        "--requeue",
        f"--signal=B:USR1@{min(max(grace, 1), MAX_SIGNAL_SECONDS)}",
        "--open-mode=append",
        f"--output={name}-%j.out",
    ]
    return out


def _run_dir(ctx: RunContext) -> str:
    opts = ctx.train.slurm
    if opts is not None and opts.run_dir:
        return shlex.quote(_mount_path("train.slurm.runDir", opts.run_dir))
    return '"${SLURM_SUBMIT_DIR}"/' + shlex.quote(f".trainops/runs/{ctx.pipeline}/{ctx.run_id}")


def _check_pyxis(ctx: RunContext) -> None:
    """What a container job cannot do, or cannot do here: warned, or refused when a mount
    path would break the srun option it goes into."""
    train = ctx.train
    _mount_path("train.checkpoint.dir", train.checkpoint.dir)
    for i, data in enumerate(train.datasets):
        if data.mount_path is not None:
            _mount_path(f"train.datasets[{i}].mountPath", data.mount_path)
        if data.claim:
            ctx.warn(f"train.datasets[{i}].claim is a Kubernetes volume: under Slurm the dataset is pulled instead")
    if train.topology is not None:
        ctx.warn("train.topology has no effect with scheduler slurm (use train.slurm.constraint for placement)")
    if train.node_selector or train.tolerations:
        ctx.warn("train.nodeSelector and train.tolerations have no effect with scheduler slurm")
    if not ctx.image.pullable:
        ctx.warn("enroot pulls from OCI registries only: the sbatch script's image cannot be imported")


def sbatch_script(ctx: RunContext) -> str:
    """The sbatch script: setup lines, then `trainops train run --slurm` (see the module doc)."""

    train = ctx.train
    check_names(train)
    opts = train.slurm
    bare_metal = opts is not None and opts.runtime == "bare-metal"
    if bare_metal and train.datasets:
        ctx.warn("train.datasets are not pulled in bare-metal mode: the trainer reads them from the shared filesystem")
    if not bare_metal:
        _check_pyxis(ctx)
    if train.checkpoint.registry_secret:
        ctx.warn("train.checkpoint.registrySecret is a Kubernetes Secret: under Slurm trainops uses your DOCKER_CONFIG")
    return render_template(
        TEMPLATE,
        header=ctx.header.splitlines(),
        directives=_directives(ctx, object_name(ctx.pipeline, ctx.run_id)),
        submit_dir=shlex.quote(opts.submit_dir) if opts and opts.submit_dir else '"${SLURM_SUBMIT_DIR}"',
        setup=list(opts.setup) if opts else [],
        run_dir=_run_dir(ctx),
        manifest=shlex.quote(ctx.manifest_name),
        env=shlex.quote(ctx.env) if ctx.env else None,
        run_id=shlex.quote(ctx.run_id),
        image=None if bare_metal else shlex.quote(ctx.image.ref),
    )
