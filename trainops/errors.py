"""The one error tree of trainops.

Library code raises these; only `trainops.cli.main` turns them into an `Error: …` line on
stderr and an exit code. Every message says what went wrong and what to do next.

Exit codes (documented in docs/reference/exit-codes.md):

    0  success
    1  internal error (a bug in trainops: rerun with TRAINOPS_DEBUG=1 and report it)
    2  usage error (bad command-line arguments)
    3  invalid manifest or input file
    4  something named does not exist (file, reference, tag, environment)
    5  refused: it would overwrite or conflict with something that exists
    6  a remote service failed or could not be reached (registry, S3, git, engine)
    7  integrity failure: content does not match its digest, or a path would escape
    8  a quality gate failed
    9  a command trainops ran for you (trainer, eval, export) failed, crashed or timed out; its status is printed
  130  interrupted (Ctrl-C), as shells report it
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class TrainopsError(Exception):
    """Base of every error trainops reports to a user."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}; {self.hint}"
        return self.message

    def to_data(self) -> str:
        """An error in a JSON result is its message and hint (`trainops.serialize`)."""
        return str(self)


class UsageError(TrainopsError):
    exit_code = 2


class InputError(TrainopsError):
    """A file or value a user gave is malformed."""

    exit_code = 3


@dataclass(frozen=True)
class Problem:
    """One problem found in a manifest, located in the file it was written in."""

    file: str
    line: int
    column: int
    path: str
    message: str
    env: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        in_overlay = self.path.startswith(f"environments.{self.env}.")
        return f"{text} (with --env {self.env})" if self.env and not in_overlay else text


class ManifestError(InputError):
    """A manifest has one or more problems; all of them are carried, each located."""

    def __init__(self, problems: Sequence[Problem], *, hint: str | None = None) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        first = str(self.problems[0]) if self.problems else "invalid manifest"
        summary = first if count == 1 else f"{count} problems in the manifest"
        default = "fix it" if count == 1 else "fix them"
        super().__init__(summary, hint=hint or f"{default} and run `trainops validate` again")


class NotFoundError(TrainopsError):
    exit_code = 4


class ExistsError(TrainopsError):
    exit_code = 5


class RemoteError(TrainopsError):
    exit_code = 6


class IntegrityError(TrainopsError):
    exit_code = 7


class GateFailedError(TrainopsError):
    exit_code = 8


class CommandFailedError(TrainopsError):
    """A user command trainops ran (train.command, eval.command, release.export) failed.

    Its own exit status is carried in the message, never passed through as trainops'
    status: a trainer exiting 3 must not read as "invalid manifest".
    """

    exit_code = 9

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
