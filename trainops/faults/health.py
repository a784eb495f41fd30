"""Node-health sources followed beside the trainer: a file (a kernel log standing for dmesg,
a DCGM health export) read from its end as it grows, or a command's output (`dmesg -w`).

Each source runs on its own daemon thread and hands every line to a callback with the node
it belongs to. A source that cannot be read (a missing file stays missing, a command that
is not installed or exits) is reported once, through `warn`, and the others go on.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LineSink = Callable[[str, str], None]  # (line, node)
POLL = 0.25
MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class HealthSource:
    node: str
    file: Path | None = None
    command: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return str(self.file) if self.file is not None else " ".join(self.command or ())


def sources_for(entries: list[tuple[str | None, list[str] | None]], nodes: list[str]) -> list[HealthSource]:
    """One source per entry and node (`{node}` in a path or argument names the node); an
    entry without `{node}` is read once, for the first node (the batch host)."""
    out: list[HealthSource] = []
    for file, command in entries:
        text = file if file is not None else " ".join(command or [])
        targets = nodes if "{node}" in text else nodes[:1]
        for node in targets:
            if file is not None:
                out.append(HealthSource(node, file=Path(file.replace("{node}", node))))
            else:
                out.append(HealthSource(node, command=tuple(a.replace("{node}", node) for a in command or [])))
    return out


class Follower:
    """Follow every source until stop(); lines go to sink, a failing source to warn (once)."""

    def __init__(self, sources: list[HealthSource], *, sink: LineSink, warn: Callable[[str], None]) -> None:
        self.sources, self.sink, self.warn = sources, sink, warn
        self.done = threading.Event()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for source in self.sources:
            target = self._file if source.file is not None else self._command
            thread = threading.Thread(target=target, args=(source,), name=f"health-{source.node}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        self.done.set()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for thread in self.threads:
            thread.join(timeout=2)

    def _file(self, source: HealthSource) -> None:
        path = source.file
        assert path is not None
        try:
            handle = path.open("rb")
        except OSError as err:
            why = err.strerror or str(err)
            self.warn(f"node-health source {path} cannot be read ({why}); the other signals are watched")
            return
        with handle:
            handle.seek(0, 2)  # only what is written from now on
            pending = b""
            while not self.done.is_set():
                chunk = handle.readline(MAX_LINE)
                if not chunk:
                    self.done.wait(POLL)
                    continue
                pending += chunk
                if pending.endswith(b"\n") or len(pending) >= MAX_LINE:
                    self.sink(pending.decode("utf-8", "replace"), source.node)
                    pending = b""

    def _command(self, source: HealthSource) -> None:
        argv = list(source.command or ())
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        except OSError as err:
            why = err.strerror or str(err)
            self.warn(f"node-health command {argv[0]!r} cannot run ({why}); the other signals are watched")
            return
        self.procs.append(proc)
        assert proc.stdout is not None
        for raw in iter(lambda: proc.stdout.readline(MAX_LINE), b""):  # type: ignore[union-attr]
            self.sink(raw.decode("utf-8", "replace"), source.node)
        code = proc.wait()
        if not self.done.is_set():
            self.warn(f"node-health command {source.name!r} ended (exit {code}); the other signals are watched")
