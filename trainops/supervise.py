"""The one process supervisor: a command trainops runs for the user, and waiting on signals
and on other processes.

- `run_command(argv, …)` starts a command (the trainer of `train run --local`, an eval, an
  export), calls `tick` every `interval` seconds while it runs (the checkpoint scans),
  passes SIGTERM and SIGINT on to it, and returns its status as a shell reports it (128+N
  for signal N). With `group`, the command gets its own process group, killed when the
  command ends (nothing it started outlives it) or after `timeout` seconds.
- `Supervision` adds what the Slurm supervisor and fault detection need: more signals passed
  on as SIGTERM (the time-limit warning SIGUSR1), a watchdog asked on every tick (hangs, the
  faults trainops.faults detects) and a tap on every line the command writes (`on_line`: its
  output is copied through, line by line, to where it would have gone); the `Outcome` says
  which signal was passed on first and why a watchdog stopped the command.
- `stop_when(stop, signals=…, until_pid=…)` sets an Event on SIGTERM/SIGINT (a second
  signal interrupts) or when another process exits (the sidecar's `--until-pid`).
- `alive(pid)`: whether a process runs (a zombie does not).
- `status_text(code)`: "exited 3", "was killed by signal 9 (SIGKILL)" — for messages.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from trainops.errors import InputError


def alive(pid: int) -> bool:
    """True while process pid exists and has not exited (a zombie only awaits its reaper)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0] != "Z"
    except (OSError, IndexError):
        return True


def status_text(code: int) -> str:
    """A command's status in words, from a shell-style code (128+N for signal N)."""
    if code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            return f"exited {code}"
        return f"was killed by signal {code - 128} ({name})"
    return f"exited {code}"


def idle_until(stop: threading.Event) -> None:
    """Do nothing until stop is set (checked every second, so a signal is acted on promptly)."""
    while not stop.wait(1.0):
        pass


@contextlib.contextmanager
def stop_when(stop: threading.Event, *, signals: bool, until_pid: int | None = None) -> Iterator[None]:
    """Set stop on SIGTERM/SIGINT (when signals; a second one raises KeyboardInterrupt)
    and when process until_pid exits."""
    previous: dict[int, Any] = {}
    signalled = threading.Event()

    def handle(_signum: int, _frame: FrameType | None) -> None:
        if signalled.is_set():  # asked twice: stop now
            raise KeyboardInterrupt
        signalled.set()
        stop.set()

    if signals and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, handle)
    done = threading.Event()
    if until_pid is not None:
        pid = until_pid

        def poll() -> None:
            while alive(pid):
                if done.wait(0.2):
                    return
            stop.set()

        threading.Thread(target=poll, name=f"until-pid-{pid}", daemon=True).start()
    try:
        yield
    finally:
        done.set()
        for number, handler in previous.items():
            signal.signal(number, handler)


def _start(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdout: int | IO[Any] | None,
    what: str,
    group: bool,
    stderr: int | None = None,
) -> Any:
    try:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, start_new_session=group)
    except FileNotFoundError:
        raise InputError(f"{what}: {argv[0]!r} not found", hint=f"install it, or fix {what} in trainops.yaml") from None
    except PermissionError:
        raise InputError(f"{what}: {argv[0]!r} is not executable", hint="chmod +x it or fix the path") from None


@dataclass(frozen=True)
class Supervision:
    """Extra signals passed on to the command as SIGTERM (the Slurm time-limit warning,
    SIGUSR1), and a watchdog asked on every tick; when it returns a reason the command gets
    SIGTERM, then SIGKILL after kill_after seconds."""

    signals: tuple[int, ...] = ()
    watchdog: Callable[[], str | None] | None = None
    kill_after: float = 30.0
    on_line: Callable[[str, str], None] | None = None  # each output line and its stream (stdout/stderr)
    log: Path | None = None  # a file both streams are also appended to, line by line (`train logs`)


@dataclass(frozen=True)
class Outcome:
    code: int  # as a shell reports it: 128+N when signal N ended the command
    signal: str | None = None  # the first signal passed on to it (SIGTERM, SIGUSR1, …)
    stopped: str | None = None  # why the watchdog stopped it (a hang), if it did


def run_command(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    interval: float,
    tick: Callable[[], object],
    stdout: int | IO[Any] | None = None,
    what: str = "train.command",
    group: bool = False,
    timeout: float | None = None,
    supervision: Supervision | None = None,
) -> Outcome:
    """Run argv; call tick every interval while it runs; pass SIGTERM/SIGINT on to it.

    tick runs on this thread between waits, so two ticks never overlap. `what` names the
    command in errors. With group, the command runs in its own process group, killed when
    the command ends or after `timeout` seconds, which raises subprocess.TimeoutExpired.
    """
    plan = supervision or Supervision()
    log: IO[bytes] | None = None
    if plan.log is not None and plan.on_line is not None:
        plan.log.parent.mkdir(parents=True, exist_ok=True)
        log = plan.log.open("ab")
    if plan.on_line is None:
        child = _start(argv, cwd=cwd, env=env, stdout=stdout, what=what, group=group)
        readers: list[threading.Thread] = []
    else:
        pipe = subprocess.PIPE
        child = _start(argv, cwd=cwd, env=env, stdout=pipe, stderr=pipe, what=what, group=group)
        keep = _keeper(log)
        readers = [
            _reader(child.stdout, stdout, "stdout", plan.on_line, keep),
            _reader(child.stderr, None, "stderr", plan.on_line, keep),
        ]
    received: list[str] = []

    def signal_child(signum: int) -> None:
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)
        elif child.poll() is None:
            child.send_signal(signum)

    def forward(signum: int, _frame: FrameType | None) -> None:
        again = signum == signal.SIGINT and "SIGINT" in received
        received.append(signal.Signals(signum).name)
        if child.poll() is None:  # SIGINT and the extra signals too: the trainer saves on SIGTERM
            # Ctrl-C twice: the person will not wait for the save
            signal_child(signal.SIGKILL if again else signal.SIGTERM)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGTERM, signal.SIGINT, *plan.signals):
            previous[number] = signal.signal(number, forward)
    watch = _Watch(plan, child, signal_child)

    def ticks() -> None:
        tick()
        watch.check()

    try:
        code = _wait(child, argv, interval=interval, tick=ticks, timeout=timeout)
    finally:
        for key, handler in previous.items():
            signal.signal(key, handler)
        if group:  # what the command started dies with it
            signal_child(signal.SIGKILL)
        if child.poll() is None:  # an exception on this thread: do not leave the command running
            child.kill()
            child.wait()
        for reader in readers:  # the rest of the output; a grandchild holding the pipe is not waited for
            reader.join(timeout=2.0)
        if log is not None:
            log.close()
    return Outcome(128 - code if code < 0 else code, received[0] if received else None, watch.stopped)


def _keeper(handle: IO[bytes] | None) -> Callable[[bytes], None] | None:
    """Append each line to the kept log (whole lines from both readers, flushed as they come)."""
    if handle is None:
        return None
    lock = threading.Lock()

    def keep(raw: bytes) -> None:
        with lock:
            handle.write(raw)
            handle.flush()

    return keep


def _reader(
    pipe: Any,
    dest: int | IO[Any] | None,
    stream: str,
    on_line: Callable[[str, str], None],
    keep: Callable[[bytes], None] | None = None,
) -> threading.Thread:
    """A thread that copies the command's output line by line to where it would have gone
    (dest; None: this process's stdout or stderr), to the kept log if any, and hands each
    line to on_line."""

    def write(raw: bytes) -> None:
        if isinstance(dest, int):
            os.write(dest, raw)
            return
        target = dest if dest is not None else (sys.stdout if stream == "stdout" else sys.stderr)
        buffer = getattr(target, "buffer", None)
        if buffer is not None:
            buffer.write(raw)
            buffer.flush()
        else:
            target.write(raw.decode("utf-8", "replace"))
            target.flush()

    def copy() -> None:
        with contextlib.suppress(OSError, ValueError):  # the destination closed: nothing left to copy to
            for raw in iter(pipe.readline, b""):
                on_line(raw.decode("utf-8", "replace"), stream)
                if keep is not None:
                    keep(raw)
                write(raw)
        pipe.close()

    thread = threading.Thread(target=copy, name=f"output-{stream}", daemon=True)
    thread.start()
    return thread


class _Watch:
    """The watchdog of a Supervision: SIGTERM when it names a reason, SIGKILL kill_after later."""

    def __init__(self, plan: Supervision, child: Any, signal_child: Callable[[int], None]) -> None:
        self.plan, self.child, self.signal_child = plan, child, signal_child
        self.stopped: str | None = None
        self.kill_at = 0.0

    def check(self) -> None:
        if self.stopped is None and self.plan.watchdog is not None:
            self.stopped = self.plan.watchdog()
            if self.stopped is not None:
                self.signal_child(signal.SIGTERM)
                self.kill_at = time.monotonic() + self.plan.kill_after
        elif self.stopped is not None and time.monotonic() >= self.kill_at:
            self.signal_child(signal.SIGKILL)


def _wait(child: Any, argv: list[str], *, interval: float, tick: Callable[[], object], timeout: float | None) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(argv, timeout or 0.0)
        try:
            code: int = child.wait(timeout=interval if left is None else min(interval, left))
            return code
        except subprocess.TimeoutExpired:
            tick()
