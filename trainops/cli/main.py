"""The `trainops` console script: the command group and the one place errors become exit codes."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from trainops import __version__
from trainops.cli import (
    ckpt_cmds,
    eval_cmds,
    hub_cmds,
    image_cmds,
    incident_cmds,
    manifest_cmds,
    project_cmds,
    registry_cmds,
    release_cmds,
    rollout_cmds,
    run_cmds,
    slo_cmds,
    train_cmds,
    ui_cmds,
)
from trainops.cli.docs import add_docs_links
from trainops.cli.options import add_verbose
from trainops.errors import TrainopsError
from trainops.interrupt import Interrupted

DEBUG_ENV = "TRAINOPS_DEBUG"


class _ReaderGone(Exception):
    """stdout's reader left (`trainops init | head -1`): raised past click, which would exit 1."""


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as err:
            raise _ReaderGone() from err


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="trainops")
@click.option("-v", "--verbose", count=True, help="Say more (repeat for debug logs; also after a command).")
def cli(verbose: int) -> None:
    """Declarative GitOps for large-model training and inference.

    One trainops.yaml describes code → image → train → checkpoint → eval → release →
    rollout; trainops carries it out on registries, S3, git and clusters.
    """
    level = logging.WARNING - 10 * verbose if verbose else logging.WARNING
    root = logging.getLogger()
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(max(level, logging.DEBUG))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Log records (retries, waits, warnings) to whatever sys.stderr is when they are emitted.

    Added beside any handler already there (an embedding program's, pytest's) rather than
    replacing them, and bound to the current stderr rather than the one at set-up, since a
    program that runs the CLI in-process (click's test runner) swaps stderr per invocation.
    """

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        return


for _command in (
    *manifest_cmds.COMMANDS,
    *project_cmds.COMMANDS,
    *registry_cmds.COMMANDS,
    *image_cmds.COMMANDS,
    *train_cmds.COMMANDS,
    *incident_cmds.COMMANDS,
    *ckpt_cmds.COMMANDS,
    *run_cmds.COMMANDS,
    *eval_cmds.COMMANDS,
    *release_cmds.COMMANDS,
    *rollout_cmds.COMMANDS,
    *ui_cmds.COMMANDS,
    *slo_cmds.COMMANDS,
    *hub_cmds.COMMANDS,
):
    cli.add_command(_command)
add_verbose(cli)
add_docs_links(cli)


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0", "false", "no")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; map every error to a one-line message and a documented exit code."""
    try:
        code = cli.main(args=argv, prog_name="trainops", standalone_mode=False)
        sys.stdout.flush()  # here, where a reader gone is handled, not at the interpreter's exit
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.exceptions.Exit as stop:
        return int(stop.exit_code)
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except Interrupted as err:  # Ctrl-C in a transfer: what was left, and how to resume
        click.echo(f"Interrupted: {err}", err=True)
        return err.exit_code
    except TrainopsError as err:
        if _debug():
            raise
        from trainops.errors import ManifestError

        if isinstance(err, ManifestError) and len(err.problems) > 1:
            for problem in err.problems:
                click.echo(str(problem), err=True)
        click.echo(f"Error: {err}", err=True)
        return err.exit_code
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except (BrokenPipeError, _ReaderGone):  # the reader left (`trainops init | head -1`): not an error
        _quiet_stdout()
        return 0
    except Exception as err:  # a bug, not a user mistake
        if _debug():
            raise
        click.echo(
            f"Error: internal error: {type(err).__name__}: {err}; rerun with {DEBUG_ENV}=1 "
            "for the traceback and report it",
            err=True,
        )
        return 1
    return code if isinstance(code, int) else 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of what the departed reader
    never took neither fails (exit 120) nor complains."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # no real descriptor (an in-process runner)
        pass


def entrypoint() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entrypoint()
