"""release.export: a command that converts a checkpoint (Megatron, DeepSpeed, …) into the
layout serving engines load (Hugging Face), run before packaging.

It runs in the manifest's directory, in its own process group, with TRAINOPS_EXPORT_INPUT
(the pulled checkpoint), TRAINOPS_EXPORT_OUTPUT (an empty directory it fills) and
TRAINOPS_CHECKPOINT_REF. A non-zero exit or an empty output is CommandFailedError (exit 9).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from trainops.errors import CommandFailedError
from trainops.manifest import Manifest
from trainops.registry.store import Resolved

ENV_INPUT = "TRAINOPS_EXPORT_INPUT"
ENV_OUTPUT = "TRAINOPS_EXPORT_OUTPUT"


def run_export(
    command: list[str],
    *,
    manifest: Manifest,
    checkpoint: Resolved,
    source: Path,
    scratch: Path,
    stdout: int | IO[Any] | None = None,
) -> Path:
    """Run release.export on source; the directory it wrote."""
    # lazy: loads subprocess
    from trainops.supervise import run_command  # the one process supervisor

    output = scratch / "export"
    output.mkdir()
    env = dict(os.environ)
    env.update({ENV_INPUT: str(source), ENV_OUTPUT: str(output), "TRAINOPS_CHECKPOINT_REF": str(checkpoint.ref)})
    code = run_command(
        list(command),
        cwd=manifest.root,
        env=env,
        interval=0.5,
        tick=lambda: None,
        stdout=stdout,
        group=True,
        what="release.export",
    ).code
    if code:
        raise CommandFailedError(f"release.export exited {code}", status=code, hint="nothing was released")
    if not any(p.is_file() for p in output.rglob("*")):
        raise CommandFailedError(
            "release.export exited 0 but wrote nothing to TRAINOPS_EXPORT_OUTPUT", hint="nothing was released"
        )
    return output
