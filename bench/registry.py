"""Registry transfers: trainops against curl, oras-py, boto3 and cp+sha256, same data, one run.

Starts its own Distribution registry and moto S3 server on free loopback ports (the same
helpers the tests use), makes the data, and runs each side as a separate process so its
time and peak RSS (os.wait4) are its own. Prints a table and writes bench/results/registry.json.

    python bench/registry.py                 # 1 GiB file, 64 x 16 MiB checkpoint, 256 MiB S3
    python bench/registry.py --size-mib 256  # quicker
    python bench/registry.py --runs 3        # three runs: each ratio's median and range

Resume: a push and a pull of one --resume-size-mib file (1.5 GiB; 64 MiB with --quick)
interrupted with SIGINT at half (from inside the process: trainops_testing/interrupting.py), then run
again; what the re-run sends or receives is measured outside trainops (a TCP proxy in
front of Distribution; bytes the process writes for file://), as a fraction of the file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.interrupting import command  # noqa: E402
from trainops_testing.services import DistributionRegistry, MotoS3  # noqa: E402
from trainops_testing.tcp_proxy import TcpProxy  # noqa: E402

PY = sys.executable
REPUSH_RUNS = 5


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    inner_seconds: float | None = None  # trainops' own report (-o json): the work without start-up


@dataclass
class Row:
    name: str
    trainops: Run
    peer_name: str
    peer: Run
    target: str

    @property
    def ratio(self) -> float:
        return self.trainops.seconds / self.peer.seconds if self.peer.seconds else float("inf")


@dataclass
class Resumed:
    """A transfer interrupted at half, then run again: fractions of the file."""

    name: str
    held: float  # what the store (push) or the staging (pull) kept after the interrupt
    again: float  # what the re-run sent or received, measured outside trainops
    target: str = "≤ 0.55"


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Time a command; its peak RSS comes from GNU time (a fork of this process would report ours)."""
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        output = f"{proc.stdout.decode()}\n{proc.stderr.decode()}"
        raise SystemExit(f"{' '.join(cmd[:4])}… failed ({proc.returncode}):\n{output}")
    peak_kb = int(proc.stderr.decode().strip().splitlines()[-1])
    inner = None
    if "trainops.cli.main" in cmd:
        inner = json.loads(proc.stdout).get("seconds")
    return Run(round(elapsed, 3), round(peak_kb / 1024, 1), inner)


def total(*runs: Run) -> Run:
    return Run(round(sum(r.seconds for r in runs), 3), max(r.peak_rss_mb for r in runs))


def make_file(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    chunk = os.urandom(16 * 1024 * 1024)
    with path.open("wb") as fh:
        left = size
        while left:
            piece = chunk[: min(left, len(chunk))]
            # vary the bytes so no two chunks (or files) are alike
            piece = hashlib.sha256(os.urandom(16)).digest() + piece[32:]
            fh.write(piece)
            digest.update(piece)
            left -= len(piece)
    return "sha256:" + digest.hexdigest()


def trainops(*args: str, env: dict[str, str]) -> list[str]:
    return [PY, "-m", "trainops.cli.main", *args, "-o", "json"]


def oras(code: str) -> list[str]:
    return [PY, "-c", "import oras.client\n" + code]


def bench_oci(reg: DistributionRegistry, work: Path, size_mib: int, env: dict[str, str]) -> list[Row]:
    import requests

    host = reg.host
    big = work / "big.bin"
    digest = make_file(big, size_mib * 1024 * 1024)
    rows: list[Row] = []

    # push: trainops vs a streaming curl -T PUT of the same blob
    location = requests.post(f"{reg.url}/v2/curl/blobs/uploads/", timeout=30).headers["Location"]
    if location.startswith("/"):
        location = reg.url + location
    sep = "&" if "?" in location else "?"
    curl_put = run(["curl", "-sS", "-f", "-T", str(big), "-X", "PUT", f"{location}{sep}digest={digest}"])
    t_push = run(trainops("push", str(big), f"oci://{host}/bench/big:v1", env=env), env=env)
    rows.append(Row(f"push {size_mib} MiB (oci)", t_push, "curl -T", curl_put, "≤ 1.1× curl, RSS < 150 MB"))

    # re-push unchanged: trainops (digest cache) vs oras-py; start-up is most of it, so the
    # median of REPUSH_RUNS runs (a single one moves by tens of ms with the machine's load)
    repush = trainops("push", str(big), f"oci://{host}/bench/big:v1", env=env)
    again = [run(repush, env=env) for _ in range(REPUSH_RUNS)]
    t_again = sorted(again, key=lambda r: r.seconds)[len(again) // 2]
    oras_push = oras(
        f"c = oras.client.OrasClient(hostname={host!r}, insecure=True)\n"
        f"c.push(target={host + '/bench/oras:v1'!r}, files=['big.bin'], disable_path_validation=True)"
    )
    o_push = run(oras_push, cwd=work)
    o_again = run(oras_push, cwd=work)
    rows.append(Row(f"push {size_mib} MiB, first (oci)", t_push, "oras-py push", o_push, "informational"))
    rows.append(Row(f"re-push unchanged {size_mib} MiB", t_again, "oras-py re-push", o_again, "< 0.3 s"))

    # pull, digest verified: trainops vs oras-py vs curl GET
    t_pull = run(trainops("pull", f"oci://{host}/bench/big:v1", str(work / "t-out"), env=env), env=env)
    o_pull = run(
        oras(
            f"c = oras.client.OrasClient(hostname={host!r}, insecure=True)\n"
            f"c.pull(target={host + '/bench/oras:v1'!r}, outdir={str(work / 'o-out')!r})"
        )
    )
    curl_get = run(["curl", "-sS", "-f", "-o", str(work / "c-out"), f"{reg.url}/v2/curl/blobs/{digest}"])
    rows.append(Row(f"pull {size_mib} MiB (oci)", t_pull, "oras-py pull", o_pull, "≥ 2.5× faster than oras-py"))
    rows.append(Row(f"pull {size_mib} MiB (oci)", t_pull, "curl GET (no verify)", curl_get, "informational"))

    # 64 x 16 MiB checkpoint: parallel transfer vs oras-py
    shards = work / "shards"
    shards.mkdir()
    shard_mib = 16 if size_mib >= 256 else 1  # --quick: 64 × 1 MiB
    for i in range(64):
        make_file(shards / f"shard-{i:02d}.safetensors", shard_mib * 1024 * 1024)
    t_many = run(trainops("push", str(shards), f"oci://{host}/bench/shards:v1", env=env), env=env)
    names = sorted(p.name for p in shards.iterdir())
    o_many = run(
        oras(
            f"c = oras.client.OrasClient(hostname={host!r}, insecure=True)\n"
            f"c.push(target={host + '/bench/oras-shards:v1'!r}, files={names!r}, disable_path_validation=True)"
        ),
        cwd=shards,
    )
    rows.append(Row(f"push 64 × {shard_mib} MiB (oci)", t_many, "oras-py push", o_many, "≥ 1.5× faster than oras-py"))
    return rows


def bench_s3(work: Path, size_mib: int, env: dict[str, str]) -> list[Row]:
    s3 = MotoS3(log_dir=work)
    s3.start()
    try:
        bucket = s3.new_bucket()
        s3env = {**env, **s3.env}
        data = work / "s3.bin"
        make_file(data, size_mib * 1024 * 1024)
        boto = "import boto3\nc = boto3.client('s3')\n"
        b_up = run([PY, "-c", boto + f"c.upload_file({str(data)!r}, {bucket!r}, 'boto/obj')"], env=s3env)
        t_up = run(trainops("push", str(data), f"s3://{bucket}/bench/obj:v1", env=s3env), env=s3env)
        b_down = run([PY, "-c", boto + f"c.download_file({bucket!r}, 'boto/obj', {str(work / 'b-down')!r})"], env=s3env)
        t_down = run(trainops("pull", f"s3://{bucket}/bench/obj:v1", str(work / "t-down"), env=s3env), env=s3env)
    finally:
        s3.stop()
    return [
        Row(f"push {size_mib} MiB (s3, moto)", t_up, "boto3 upload_file", b_up, "≤ 1.0× boto3, memory flat"),
        Row(f"pull {size_mib} MiB (s3, moto)", t_down, "boto3 download_file", b_down, "≤ 1.0× boto3, memory flat"),
    ]


def bench_file(work: Path, size_mib: int, env: dict[str, str]) -> list[Row]:
    src = work / "local.bin"
    make_file(src, size_mib * 1024 * 1024)
    cp = run(["cp", str(src), str(work / "cp-copy")])
    sha = run([PY, "-c", f"import hashlib; hashlib.file_digest(open({str(work / 'cp-copy')!r}, 'rb'), 'sha256')"])
    t = run(trainops("push", str(src), f"file://{work / 'reg'}/bench/x:v1", env=env), env=env)
    return [Row(f"push {size_mib} MiB (file://)", t, "cp + sha256", total(cp, sha), "≤ 1.5× cp + sha256")]


def _sizes(files: list[Path]) -> int:
    return sum(p.stat().st_size for p in files if p.is_file())


def _interrupt_then_again(
    args: tuple[str, ...], env: dict[str, str], size: int, held: Callable[[], int], moved: Callable[[], int]
) -> tuple[float, float]:
    """(kept after SIGINT at half, moved by the re-run) as fractions of size; moved(): a
    count that grows with what the processes move (read before and after the re-run)."""
    cut = subprocess.run(
        command(*args, "-j", "1"), env={**env, "TRAINOPS_TEST_INTERRUPT_AFTER": str(size // 2)}, capture_output=True
    )
    if cut.returncode != 130:
        raise SystemExit(f"{args[0]} was not interrupted ({cut.returncode}): {cut.stderr.decode()[-400:]}")
    kept = held()
    before = moved()
    again = subprocess.run(command(*args), env=env, capture_output=True)
    if again.returncode != 0:
        raise SystemExit(f"the re-run of {args[0]} failed: {again.stderr.decode()[-400:]}")
    return round(kept / size, 3), round((moved() - before) / size, 3)


def bench_resume(reg: DistributionRegistry, work: Path, size_mib: int, env: dict[str, str]) -> list[Resumed]:
    size = size_mib * 1024 * 1024
    src = work / "resume"
    src.mkdir()
    make_file(src / "model.safetensors", size)
    rows: list[Resumed] = []
    proxy = TcpProxy(reg.host)
    try:
        oci = {**env, "TRAINOPS_INSECURE_REGISTRIES": f"{reg.host},{proxy.host}"}
        ref = f"oci://{proxy.host}/bench/resume:v1"
        uploads = reg.data_dir / "docker/registry/v2/repositories/bench/resume/_uploads"
        push = ("push", str(src), ref)
        held, again = _interrupt_then_again(
            push, oci, size, lambda: _sizes([*uploads.glob("*/data")]), lambda: proxy.sent_up
        )
        rows.append(Resumed(f"push {size_mib} MiB, again (oci)", held, again))
        pull = ("pull", ref, str(work / "oci-out"))
        staged = lambda: _sizes([*work.glob(".oci-out.trainops-pull-*/*")])  # noqa: E731
        held, again = _interrupt_then_again(pull, oci, size, staged, lambda: proxy.sent_down)
        rows.append(Resumed(f"pull {size_mib} MiB, again (oci)", held, again))
    finally:
        proxy.close()
    # file://: what each process writes (/proc/self/io wchar at its exit), summed
    report = work / "written"
    total = [0]

    def written() -> int:
        if report.is_file():
            total[0] += int(report.read_text())
            report.unlink()
        return total[0]

    files = {**env, "TRAINOPS_TEST_WRITTEN": str(report)}
    repo = work / "reg" / "bench" / "resume"
    parts = lambda: _sizes([*(repo / ".trainops" / "tmp").glob("*.part")])  # noqa: E731
    held, again = _interrupt_then_again(("push", str(src), f"file://{repo}:v1"), files, size, parts, written)
    rows.append(Resumed(f"push {size_mib} MiB, again (file://)", held, again))
    staged = lambda: _sizes([*work.glob(".file-out.trainops-pull-*/*")])  # noqa: E731
    pull = ("pull", f"file://{repo}:v1", str(work / "file-out"))
    held, again = _interrupt_then_again(pull, files, size, staged, written)
    rows.append(Resumed(f"pull {size_mib} MiB, again (file://)", held, again))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--s3-size-mib", type=int, default=256)
    parser.add_argument("--skip", action="append", default=[], choices=["oci", "s3", "file"])
    parser.add_argument(
        "--quick", action="store_true", help="8 MiB of data, seconds: checks the benchmark runs (CI); writes no results"
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="repeat the whole benchmark N times; report each ratio's median and range"
    )
    parser.add_argument("--resume-size-mib", type=int, default=1536, help="the file interrupted at half (oci, file)")
    parser.add_argument("--only-resume", action="store_true", help="only the interrupted transfers (oci, file)")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/registry.json")
    args = parser.parse_args()
    load = docresult.Load()
    if args.quick:
        args.size_mib = args.s3_size_mib = 8
        args.resume_size_mib = min(args.resume_size_mib, 64)  # large enough for the resumable upload
    runs: list[list[Row]] = []
    loads: list[float] = []
    resumed: list[Resumed] = []
    for number in range(args.runs):
        loads.append(os.getloadavg()[0])
        rows, resumed = one_run(args)
        runs.append(rows)
        if args.runs > 1:
            print(f"run {number + 1}/{args.runs} done (load average {loads[-1]:.1f} at its start)", file=sys.stderr)
    rows = runs[-1]
    if rows:
        print("trainops: process wall time (its own report of the work, without start-up) and peak RSS")
        print(f"{'benchmark':34} {'trainops':>24} {'peer':>26} {'ratio':>6}  target")
    for r in rows:
        inner = f" ({r.trainops.inner_seconds:.2f}s)" if r.trainops.inner_seconds is not None else ""
        mine = f"{r.trainops.seconds:.2f}s{inner} {r.trainops.peak_rss_mb:.0f}MB"
        peer = f"{r.peer_name} {r.peer.seconds:.2f}s {r.peer.peak_rss_mb:.0f}MB"
        print(f"{r.name:34} {mine:>24} {peer:>26} {r.ratio:6.2f}  {r.target}")
    if resumed:
        print(
            f"\ninterrupted at half, then run again: fractions of the file (load average {loads[-1]:.1f} at the start)"
        )
        for x in resumed:
            print(f"{x.name:34} kept {x.held:5.2f}  moved again {x.again:5.2f}  target {x.target}")
    spreads = _spreads(runs)
    if args.runs > 1:
        print(f"\nratio over {args.runs} runs (load averages {', '.join(f'{x:.1f}' for x in loads)}): median [min–max]")
        for name, peer_name, values in spreads:
            print(f"{name:34} vs {peer_name:24} {statistics.median(values):6.2f} [{min(values):.2f}–{max(values):.2f}]")
    if args.quick:
        return
    out = ROOT / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    (out / ("registry-resume.json" if args.only_resume else "registry.json")).write_text(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "loadAverages": loads,
                "rows": [{**asdict(r), "ratio": round(r.ratio, 3)} for r in rows],
                "resumed": [asdict(x) for x in resumed],
                "runs": [[{**asdict(r), "ratio": round(r.ratio, 3)} for r in run_rows] for run_rows in runs],
                "spread": [
                    {"name": n, "peer": p, "median": statistics.median(v), "min": min(v), "max": max(v)}
                    for n, p, v in spreads
                ],
                "id": uuid.uuid4().hex,
            },
            indent=2,
        )
    )
    if args.doc:
        write_doc(rows, spreads, load)


def write_doc(rows: list[Row], spreads: list[tuple[str, str, list[float]]], load: docresult.Load) -> None:
    """The committed results (docs/operations/results/registry.json): the last run's rows, each
    ratio's median and range over the runs in brackets."""
    spread = {(name, peer): values for name, peer, values in spreads}
    table = []
    for r in rows:
        inner = f" ({r.trainops.inner_seconds:.2f} s)" if r.trainops.inner_seconds is not None else ""
        values = spread.get((r.name, r.peer_name), [])
        over = (
            f"; median {statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]" if len(values) > 1 else ""
        )
        table.append(
            [
                r.name,
                f"{r.trainops.seconds:.2f} s{inner}, {r.trainops.peak_rss_mb:.0f} MB",
                f"{r.peer_name} {r.peer.seconds:.2f} s, {r.peer.peak_rss_mb:.0f} MB",
                f"{r.ratio:.2f}{over}",
                r.target or "—",
            ]
        )
    docresult.write(
        docresult.default_path("registry"),
        benchmark="registry",
        title="Transfers against curl, oras-py, boto3 and cp + sha256 (process wall time, peak RSS)",
        load=load,
        columns=["benchmark", "trainops", "peer", "ratio", "target"],
        rows=table,
    )


def one_run(args: argparse.Namespace) -> tuple[list[Row], list[Resumed]]:
    """Every selected backend once, in a fresh directory with fresh servers."""
    rows: list[Row] = []
    resumed: list[Resumed] = []
    with tempfile.TemporaryDirectory(prefix="trainops-bench-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "TRAINOPS_CACHE_DIR": str(work / "cache"), "PYTHONPATH": str(ROOT)}
        if args.only_resume:
            reg = DistributionRegistry(work / "registry-data")
            reg.start()
            try:
                (work / "resume").mkdir()
                return rows, bench_resume(reg, work / "resume", args.resume_size_mib, env)
            finally:
                reg.stop()
        if "oci" not in args.skip:
            reg = DistributionRegistry(work / "registry-data")
            reg.start()
            try:
                env["TRAINOPS_INSECURE_REGISTRIES"] = reg.host
                (work / "oci").mkdir()
                rows += bench_oci(reg, work / "oci", args.size_mib, env)
                (work / "resume").mkdir()
                resumed = bench_resume(reg, work / "resume", args.resume_size_mib, env)
            finally:
                reg.stop()
        if "file" not in args.skip:
            (work / "file").mkdir()
            rows += bench_file(work / "file", args.size_mib, env)
        if "s3" not in args.skip:
            (work / "s3").mkdir()
            rows += bench_s3(work / "s3", args.s3_size_mib, env)
    return rows, resumed


def _spreads(runs: list[list[Row]]) -> list[tuple[str, str, list[float]]]:
    """Each row's ratio over the runs, keyed by (row, peer)."""
    by_key: dict[tuple[str, str], list[float]] = {}
    for run_rows in runs:
        for r in run_rows:
            by_key.setdefault((r.name, r.peer_name), []).append(round(r.ratio, 3))
    return [(name, peer, values) for (name, peer), values in by_key.items()]


if __name__ == "__main__":
    main()
