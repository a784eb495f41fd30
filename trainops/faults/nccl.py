"""NCCL's own signals: the NCCL Inspector's Prometheus output and PyTorch's flight recorder.

**NCCL Inspector** (NCCL's profiler plugin, `NCCL_INSPECTOR_ENABLE=1`,
`NCCL_INSPECTOR_PROM_DUMP=1`): every dump interval each GPU's file
`<NCCL_INSPECTOR_DUMP_DIR>/nccl_inspector_metrics_<device uuid>.prom` is rewritten with, per
communicator, the last completed collective as Prometheus text — `nccl_algorithm_bandwidth_gbs`,
`nccl_bus_bandwidth_gbs` and `nccl_collective_exec_time_microseconds`, labelled `comm_id`,
`hostname`, `rank`, `nranks`, `n_nodes`, `gpu_device_id`, `collective`, `coll_sn` (the
collective's sequence number in its communicator), `timestamp` (UTC) and `message_size`.
`InspectorFiles` re-reads a file when it changes; each rank's progress in its widest
communicator (the most ranks: the world's) is `coll_sn` at `timestamp`, a second source for the
straggler detector beside the trainer's lines; the bandwidths are the evidence.

In its default JSON mode (`NCCL_INSPECTOR_PROM_DUMP=0`) the Inspector appends to
`<NCCL_INSPECTOR_DUMP_DIR>/<hostname>-pid<pid>.log`, one JSON object a line, a record of every
collective of every communicator: `{"header": {"id", "rank", "n_ranks", "nnodes"}, "metadata":
{"dump_timestamp_us", "hostname", "pid", …}, "coll_perf": {"coll", "coll_sn",
"coll_exec_time_us", "coll_busbw_gbs", "coll_algobw_gbs", …}}` (records of other kinds — P2P
operations, dump statistics — have no `coll_perf` and are passed over). `InspectorFiles`
follows such files (any pattern not ending in `.prom`) from their start; with a record of
every rank for the same collective, the straggler detector's `Arrivals` sees which rank its
peers waited for (trainops.faults.straggler).

**Flight recorder** (PyTorch's ProcessGroupNCCL, `TORCH_NCCL_TRACE_BUFFER_SIZE` > 0 with
`TORCH_NCCL_DUMP_ON_TIMEOUT=1`): on a collective timeout each rank writes its ring buffer to
`<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>` (default `/tmp/nccl_trace_rank_<rank>`), a pickle (or
JSON) of `{"version", "pg_config", "pg_status", "entries": [{"collective_seq_id",
"profiling_name", "process_group", "state", "time_created_ns", …}]}`. `flight_recorder_lines`
reads the dumps written since a start and says, per process group, which collective each rank
last completed and which ones it is stuck in — and the ranks that never entered the collective
their peers wait in. Pickles are read with no class allowed (the dump holds only dicts, lists,
tuples, strings and numbers), so a dump cannot run code here.
"""

from __future__ import annotations

import glob
import io
import json
import os
import pickle
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeGuard

from trainops.faults.progress import ProgressFiles

METRICS = ("nccl_algorithm_bandwidth_gbs", "nccl_bus_bandwidth_gbs", "nccl_collective_exec_time_microseconds")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\s+(\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
MAX_DUMP = 64 * 1024 * 1024


@dataclass(frozen=True)
class Collective:
    """One rank's last completed collective in one communicator, as the Inspector dumped it."""

    rank: int
    host: str | None
    comm: str
    nranks: int
    collective: str
    sn: int
    at: datetime | None
    bus_gbs: float | None = None
    algo_gbs: float | None = None
    exec_us: float | None = None
    gpu: str | None = None

    def line(self) -> str:
        bus = f"busbw {self.bus_gbs:g} GB/s" if self.bus_gbs is not None else "busbw ?"
        took = f", {self.exec_us:g} µs" if self.exec_us is not None else ""
        where = f" on {self.host}" + (f" {self.gpu}" if self.gpu else "") if self.host else ""
        return f"NCCL Inspector: rank {self.rank}{where}: {self.collective} coll_sn {self.sn} {bus}{took}"


def parse_inspector(text: str) -> list[Collective] | str:
    """The samples of one Inspector file (one Collective per rank, communicator and collective
    sequence number, its three metrics merged), or why it is not one."""
    merged: dict[tuple[str, int, int], dict[str, Any]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            return f"line {number} is not a Prometheus sample"
        name, body, value = match.groups()
        if name not in METRICS:
            continue
        labels = dict(_LABEL.findall(body))
        try:
            rank, sn, number_value = int(labels["rank"]), int(labels["coll_sn"]), float(value)
            nranks = int(labels.get("nranks") or labels.get("n_ranks") or 0)
        except (KeyError, ValueError):
            return f"line {number}: no integer rank and coll_sn, or a value that is not a number"
        key = (labels.get("comm_id", "?"), rank, sn)
        item = merged.setdefault(key, {"labels": labels, "nranks": nranks})
        item[name] = number_value
    out = []
    for (comm, rank, sn), item in merged.items():
        labels = item["labels"]
        out.append(
            Collective(
                rank=rank,
                host=labels.get("hostname"),
                comm=comm,
                nranks=item["nranks"],
                collective=labels.get("collective", "?"),
                sn=sn,
                at=_utc(labels.get("timestamp")),
                bus_gbs=item.get("nccl_bus_bandwidth_gbs"),
                algo_gbs=item.get("nccl_algorithm_bandwidth_gbs"),
                exec_us=item.get("nccl_collective_exec_time_microseconds"),
                gpu=labels.get("gpu_device_id"),
            )
        )
    return out


def parse_record(text: str) -> Collective | str | None:
    """One line of the Inspector's JSON output: a rank's collective, None for a record of
    another kind (no `coll_perf`), or why the line is not a record."""
    try:
        record = json.loads(text)
    except ValueError:
        return "not JSON"
    if not isinstance(record, dict):
        return "not a JSON object"
    perf, header, meta = record.get("coll_perf"), record.get("header"), record.get("metadata") or {}
    if perf is None:
        return None
    if not isinstance(perf, dict) or not isinstance(header, dict) or not isinstance(meta, dict):
        return "coll_perf, header and metadata are not objects"
    rank, nranks, sn = header.get("rank"), header.get("n_ranks"), perf.get("coll_sn")
    took = perf.get("coll_exec_time_us")
    if not (_integer(rank) and _integer(nranks) and _integer(sn)):
        return "no integer header.rank, header.n_ranks and coll_perf.coll_sn"
    if isinstance(took, bool) or not isinstance(took, (int, float)) or took < 0:
        return "no coll_perf.coll_exec_time_us (microseconds)"
    stamp = meta.get("dump_timestamp_us")
    at = (
        datetime.fromtimestamp(stamp / 1e6, timezone.utc)
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool)
        else None
    )
    host = meta.get("hostname")
    bus, algo = perf.get("coll_busbw_gbs"), perf.get("coll_algobw_gbs")
    return Collective(
        rank=rank,
        host=host if isinstance(host, str) and host else None,
        comm=str(header.get("id", "?")),
        nranks=nranks,
        collective=str(perf.get("coll", "?")),
        sn=sn,
        at=at,
        bus_gbs=float(bus) if isinstance(bus, (int, float)) else None,
        algo_gbs=float(algo) if isinstance(algo, (int, float)) else None,
        exec_us=float(took),
    )


def _integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _utc(text: str | None) -> datetime | None:
    if not text:
        return None
    from trainops import clock

    try:
        return clock.parse(text)
    except ValueError:
        return None


class InspectorFiles:
    """The Inspector's files matching `patterns`: Prometheus files (`*.prom`) read again
    whenever one changes, JSON-mode files followed line by line."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = [p for p in patterns if p.endswith(".prom")]
        self.lines = ProgressFiles([p for p in patterns if not p.endswith(".prom")])
        self.seen: dict[str, tuple[float, int]] = {}
        self.latest: dict[int, Collective] = {}  # rank → its last collective in its widest communicator

    def poll(self) -> tuple[list[Collective], list[tuple[str, str]], list[Collective]]:
        """The ranks' new progress (their widest communicator's last collective), the files
        that could not be read — (file, why) — and every collective read."""
        fresh: list[Collective] = []
        bad: list[tuple[str, str]] = []
        read: list[Collective] = []
        records: list[Collective] = []
        for name, number, text in self.lines.poll():
            record = parse_record(text)
            if isinstance(record, str):
                bad.append((name, f"line {number}: {record}"))
            elif record is not None:
                self.lines.files[name].ranks.add(record.rank)
                records.append(record)
        if records:
            read += records
            fresh += self._advance(records)
        for pattern in self.patterns:
            for name in sorted(glob.glob(pattern)):
                try:
                    stat = os.stat(name)
                    if self.seen.get(name) == (stat.st_mtime, stat.st_size):
                        continue
                    self.seen[name] = (stat.st_mtime, stat.st_size)
                    text = Path(name).read_text(encoding="utf-8", errors="replace")
                except OSError as err:
                    bad.append((name, err.strerror or str(err)))
                    continue
                found = parse_inspector(text)
                if isinstance(found, str):
                    bad.append((name, found))
                    continue
                read += found
                fresh += self._advance(found)
        return fresh, bad, read

    def _advance(self, samples: list[Collective]) -> list[Collective]:
        widest: dict[int, Collective] = {}
        for sample in samples:
            best = widest.get(sample.rank)
            if best is None or (sample.nranks, sample.sn) > (best.nranks, best.sn):
                widest[sample.rank] = sample
        out = []
        for rank, sample in widest.items():
            before = self.latest.get(rank)
            if before is None or before.comm != sample.comm or sample.sn > before.sn:
                self.latest[rank] = sample
                out.append(sample)
        return out

    def compare(self, rank: int) -> list[str]:
        """The rank's last collective beside its peers' (the evidence of a slow-node verdict)."""
        mine = self.latest.get(rank)
        if mine is None:
            return []
        peers = [c.bus_gbs for r, c in self.latest.items() if r != rank and c.bus_gbs is not None]
        line = mine.line()
        if peers:
            peers.sort()
            line += f" (peers' median busbw {peers[len(peers) // 2]:g} GB/s)"
        return [line]


# -- the flight recorder -----------------------------------------------------------------------


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a flight-recorder dump holds no {module}.{name}")


def read_dump(path: Path) -> dict[str, Any] | str:
    """One rank's flight-recorder dump (pickle or JSON), or why it cannot be read."""
    try:
        data = path.read_bytes()[: MAX_DUMP + 1]
    except OSError as err:
        return err.strerror or str(err)
    if len(data) > MAX_DUMP:
        return f"larger than {MAX_DUMP // (1024 * 1024)} MiB"
    try:
        loaded = json.loads(data) if data.lstrip()[:1] == b"{" else _NoClasses(io.BytesIO(data)).load()
    except (ValueError, pickle.UnpicklingError, EOFError) as err:
        return f"not a flight-recorder dump ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
    if not isinstance(loaded, dict) or not isinstance(loaded.get("entries"), list):
        return "not a flight-recorder dump (no entries)"
    return loaded


_RANK_SUFFIX = re.compile(r"(\d+)$")


def flight_recorder_lines(pattern: str, *, since: float) -> tuple[list[str], list[str]]:
    """What the dumps matching `pattern` written since `since` (Unix seconds) say of the hang:
    evidence lines, and the dumps that could not be read (said as warnings)."""
    dumps: dict[int, dict[str, Any]] = {}
    bad: list[str] = []
    for name in sorted(glob.glob(pattern)):
        path = Path(name)
        match = _RANK_SUFFIX.search(path.name)
        try:
            if path.stat().st_mtime < since:
                continue
        except OSError:
            continue
        loaded = read_dump(path)
        if isinstance(loaded, str):
            bad.append(f"{name}: {loaded}")
        elif match is not None:
            dumps[int(match.group(1))] = loaded
    return _analyse(dumps), bad


def _analyse(dumps: dict[int, dict[str, Any]]) -> list[str]:
    """Per process group: the collective the ranks are stuck in, and who never entered it."""
    if not dumps:
        return []
    # per process group, each rank's collectives by sequence id and their state
    groups: dict[str, dict[int, dict[int, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for rank, dump in dumps.items():
        for entry in dump["entries"]:
            if not isinstance(entry, dict) or not isinstance(entry.get("collective_seq_id"), int):
                continue
            group = entry.get("process_group")
            name = "/".join(str(g) for g in group) if isinstance(group, (list, tuple)) else str(entry.get("pg_id"))
            groups[name][rank][entry["collective_seq_id"]] = entry
    lines = [f"flight recorder: dumps of rank(s) {', '.join(str(r) for r in sorted(dumps))}"]
    for name, ranks in sorted(groups.items()):
        stuck = {r: min((s for s, e in seqs.items() if e.get("state") != "completed"), default=None)
                 for r, seqs in ranks.items()}  # fmt: skip
        waiting = {r: s for r, s in stuck.items() if s is not None}
        if not waiting:
            continue
        seq = min(waiting.values())
        entry = next(ranks[r][seq] for r, s in waiting.items() if s == seq)
        what = f"{entry.get('profiling_name', '?')} seq {seq} of process group {name}"
        inside = sorted(r for r, seqs in ranks.items() if seq in seqs)
        lines.append(f"flight recorder: rank(s) {', '.join(map(str, inside))} wait in {what} "
                     f"({entry.get('state', '?')})")  # fmt: skip
        missing = sorted(r for r in ranks if seq not in ranks[r])
        if missing:
            last = {r: max((s for s, e in ranks[r].items() if e.get("state") == "completed"), default=0)
                    for r in missing}  # fmt: skip
            said = ", ".join(f"rank {r} (last completed seq {last[r]})" for r in missing)
            lines.append(f"flight recorder: never entered {what}: {said}")
    return lines
