"""Slurm: an sbatch script (templates/slurm/sbatch.sh.j2) that runs the job under pyxis/enroot,
or, with train.slurm.runtime bare-metal, one (sbatch-bare-metal.sh.j2) that runs no container:
its setup lines, then `trainops train run --slurm`, the supervisor of trainops.pipeline.slurm.

One task per node (`srun --container-image=<image by digest>`), each starting torchrun with
c10d rendezvous on the first node of the allocation; the same environment contract and
NCCL settings as the pods. On the batch host, before training, the checkpoint restore step
runs in the agent image; the checkpoint watcher runs beside training in the background and
gets SIGTERM (then the script waits for its final push) when training ends. `--signal`
sends the script SIGUSR1 checkpoint.gracePeriod before the time limit: it passes SIGTERM to
the training and then, with `--requeue`, puts the job back in the queue so the next start
resumes from the newest checkpoint (a SIGTERM from scancel is passed on without a requeue).

Every value from the manifest that reaches the shell is quoted with shlex.quote, and
`#SBATCH` values (which sbatch reads itself) are limited to characters that cannot end the
directive, so no manifest value can run a command.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from trainops.errors import InputError
from trainops.render.checkpoint import pull_argv, qualify, restore_steps, watch_argv
from trainops.render.context import RunContext
from trainops.render.env import RDZV_PORT, check_names, launch_argv
from trainops.render.names import object_name
from trainops.render.quantity import mebibytes, whole_cpus
from trainops.spec.common import duration_seconds

TEMPLATE = "slurm/sbatch.sh.j2"
BARE_METAL_TEMPLATE = "slurm/sbatch-bare-metal.sh.j2"
_DIRECTIVE_SAFE = re.compile(r"^[A-Za-z0-9_.,:@%+=/\[\]|&*()!-]+$")
_MOUNT_UNSAFE = re.compile(r"[,:\s]")
_ENDPOINT = "\x00endpoint\x00"  # stands for "${TRAINOPS_RDZV_ENDPOINT}" until quoting
MAX_SIGNAL_SECONDS = 65535


def _directive(field_name: str, value: str) -> str:
    if not _DIRECTIVE_SAFE.match(value):
        raise InputError(
            f"{field_name} {value!r} cannot be written as an #SBATCH option",
            hint="use letters, digits and . , : @ % + = / [ ] | & * ( ) ! - only (no spaces, quotes or newlines)",
        )
    return value


def _words(argv: list[str]) -> str:
    """argv as shell words; the rendezvous placeholder becomes a double-quoted variable."""
    out = []
    for arg in argv:
        parts = arg.split(_ENDPOINT)
        out.append('"${TRAINOPS_RDZV_ENDPOINT}"'.join(shlex.quote(p) if p else "" for p in parts))
    return " ".join(out)


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


def bare_metal_script(ctx: RunContext) -> str:
    """No container: setup lines, then `trainops train run --slurm` supervises the job (see the template)."""
    from trainops.templating import render_template

    train = ctx.train
    check_names(train)
    opts = train.slurm
    assert opts is not None
    if train.datasets:
        ctx.warn("train.datasets are not pulled in bare-metal mode: the trainer reads them from the shared filesystem")
    if train.checkpoint.registry_secret:
        ctx.warn("train.checkpoint.registrySecret is a Kubernetes Secret: under Slurm trainops uses your DOCKER_CONFIG")
    return render_template(
        BARE_METAL_TEMPLATE,
        header=ctx.header.splitlines(),
        directives=_directives(ctx, object_name(ctx.pipeline, ctx.run_id)),
        submit_dir=shlex.quote(opts.submit_dir) if opts.submit_dir else '"${SLURM_SUBMIT_DIR}"',
        setup=list(opts.setup),
        run_dir=_run_dir(ctx),
        manifest=shlex.quote(ctx.manifest_name),
        env=shlex.quote(ctx.env) if ctx.env else None,
        run_id=shlex.quote(ctx.run_id),
    )


def sbatch_script(ctx: RunContext) -> str:
    from trainops.templating import render_template

    train = ctx.train
    if train.slurm is not None and train.slurm.runtime == "bare-metal":
        return bare_metal_script(ctx)
    check_names(train)
    name = object_name(ctx.pipeline, ctx.run_id)
    ckpt_dir = _mount_path("train.checkpoint.dir", train.checkpoint.dir)
    if train.topology is not None:
        ctx.warn("train.topology has no effect with scheduler slurm (use train.slurm.constraint for placement)")
    if train.node_selector or train.tolerations:
        ctx.warn("train.nodeSelector and train.tolerations have no effect with scheduler slurm")
    if not ctx.image.pullable:
        ctx.warn("enroot pulls from OCI registries only: the sbatch script's image cannot be imported")
    if train.checkpoint.registry_secret:
        ctx.warn(
            "train.checkpoint.registrySecret is a Kubernetes Secret: under Slurm the agent uses your DOCKER_CONFIG"
        )

    run_dir = _run_dir(ctx)

    exports = ctx.process_env(endpoint=None)  # the endpoint is known once the allocation is: the script exports it
    datasets: list[dict[str, Any]] = []
    for i, data in enumerate(train.datasets):
        if data.mount_path is None:
            continue
        if data.claim:
            ctx.warn(f"train.datasets[{i}].claim is a Kubernetes volume: under Slurm the dataset is pulled instead")
        datasets.append(
            {
                "host": shlex.quote(f"datasets/{data.name}"),
                "mount": shlex.quote(_mount_path(f"train.datasets[{i}].mountPath", data.mount_path)),
                "pull": _words(pull_argv(qualify(data.ref, ctx.spec.registry), data.mount_path, insecure=ctx.insecure)),
            }
        )
    restore = [
        _words(argv)
        for _, argv in restore_steps(train, ctx.repository, registry=ctx.spec.registry, insecure=ctx.insecure)
    ]
    command = launch_argv(list(train.command), train=train, endpoint=_ENDPOINT, run_id=ctx.run_id)
    return render_template(
        TEMPLATE,
        header=ctx.header.splitlines(),
        directives=_directives(ctx, name),
        image=shlex.quote(ctx.image.enroot if ctx.image.pullable else ctx.image.ref),
        agent_image=shlex.quote(ctx.agent_image.enroot if ctx.agent_image.pullable else ctx.agent_image.ref),
        ckpt_dir=shlex.quote(ckpt_dir),
        run_dir=run_dir,
        exports=[(key, shlex.quote(value)) for key, value in exports],
        secrets=list(train.secret_env),
        port=RDZV_PORT,
        datasets=datasets,
        restore=restore,
        watch=_words(watch_argv(train, ctx.repository, ctx.run_id, insecure=ctx.insecure)),
        nodes=train.nodes,
        workdir=shlex.quote(train.working_dir) if train.working_dir else None,
        train=_words(command),
    )
