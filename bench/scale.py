"""Listing at scale: N checkpoint tags in one repository and M repositories in a registry.

Builds, on file://, oci:// (a Distribution registry on a free loopback port) and s3://
(moto), one repository holding N checkpoints tagged step-100, step-200, … (distinct
manifests, each naming the one before it as its parent, as a long run leaves them) and M
small repositories; then times, each as its own process, `registry ls`, `registry ls -l`,
`ckpt ls`, `ckpt latest`, a lineage walk up over 1,000 checkpoints and `registry ls` of the
registry (its repositories), against `skopeo list-tags` on oci:// and a boto3 paginator
listing the repository's tag objects on s3:// (its own process, as trainops). Each command runs three
times: the median and the spread (min–max) are reported. Writes bench/results/scale.json.

    python bench/scale.py                 # N = 10,000 tags, M = 1,000 repositories
    python bench/scale.py --quick         # N = 200, M = 20, one run each (CI)
    python bench/scale.py --skip s3       # only some backends (file, oci, s3)

The checkpoints share one layer and one config blob (listing reads manifests, not blobs);
the file:// repository is written as an OCI layout directly (a push per tag would only
measure the setup), the others through trainops' own backends, several requests at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops.registry import media  # noqa: E402
from trainops.registry.artifact import build_manifest, canonical_json  # noqa: E402
from trainops.registry.backends import open_backend  # noqa: E402
from trainops.registry.backends.base import Backend, Descriptor, ManifestData, sha256_digest  # noqa: E402
from trainops.registry.lineage_data import Lineage, Parent  # noqa: E402
from trainops.registry.reference import RegistryRoot  # noqa: E402
from trainops.registry.store import bytes_source  # noqa: E402
from trainops_testing.services import DistributionRegistry, MotoS3  # noqa: E402

PY = sys.executable
RUNS = [3]  # each command's runs (one in --quick mode)
LAYER = b"x" * 4096
CONFIG = canonical_json({"schemaVersion": 1, "kind": "checkpoint", "created": "2026-12-03T00:00:00Z"})


# The s3:// peer: every key under a prefix, printed, as `aws s3api list-objects-v2` would
BOTO3_LIST = """
import sys, boto3
pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=sys.argv[1], Prefix=sys.argv[2])
print("\\n".join(o["Key"] for page in pages for o in page.get("Contents") or []))
"""


@dataclass
class Timing:
    name: str
    backend: str
    median: float
    low: float
    high: float
    cpu: float = 0.0  # median user + system CPU seconds: steadier than wall time on a busy machine
    peer: str | None = None
    peer_median: float | None = None
    goal: str = ""

    @property
    def ratio(self) -> float | None:
        return self.median / self.peer_median if self.peer_median else None


def checkpoints(n: int) -> Iterator[tuple[str, ManifestData]]:
    """(tag, manifest) of n checkpoints, each the parent of the next."""
    layer = Descriptor(media.WEIGHT_RAW, sha256_digest(LAYER), len(LAYER), {media.A_FILEPATH: "model.safetensors"})
    config = Descriptor(media.CONFIG, sha256_digest(CONFIG), len(CONFIG))
    parent: Parent | None = None
    for i in range(1, n + 1):
        step = i * 100
        lineage = Lineage(run_id="bench", step=step, metrics={"loss": 10.0 / i}, parents=[parent] if parent else [])
        manifest = build_manifest(
            kind="checkpoint",
            config=config,
            layers=[layer],
            created=f"2026-12-03T00:00:{i % 60:02d}Z",
            lineage=lineage,
            annotations={},
        )
        tag = f"step-{step}"
        yield tag, manifest
        parent = Parent(digest=manifest.digest, ref=tag, relation="parent")


def fill_file(repo: Path, items: list[tuple[str, ManifestData]]) -> None:
    """An OCI layout holding every manifest, written directly (one index.json)."""
    blobs = repo / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    (repo / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    for data in (LAYER, CONFIG, *(m.data for _, m in items)):
        (blobs / sha256_digest(data)[7:]).write_bytes(data)
    entries = [
        {"mediaType": m.media_type, "digest": m.digest, "size": len(m.data), "annotations": {media.A_REF_NAME: tag}}
        for tag, m in items
    ]
    index = {"schemaVersion": 2, "mediaType": media.OCI_INDEX, "manifests": entries}
    (repo / "index.json").write_text(json.dumps(index, indent=2))


def fill_remote(backend: Backend, repo: str, items: list[tuple[str, ManifestData]]) -> None:
    for data in (LAYER, CONFIG):
        backend.upload_blob(repo, bytes_source(data))
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda item: backend.put_manifest(repo, item[1], tag=item[0]), items))


def timed(cmd: list[str], env: dict[str, str], cpu: list[float] | None = None) -> list[float]:
    """Wall times of RUNS runs of cmd; their CPU times (user + system) go to cpu."""
    times = []
    for _ in range(RUNS[0]):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cpu is not None:
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[2:6])}… failed ({proc.returncode}):\n{proc.stderr.decode()[-2000:]}")
    return times


def trainops(*args: str) -> list[str]:
    return [PY, "-m", "trainops.cli.main", *args]


def measure(
    rows: list[Timing],
    backend: str,
    repo: str,
    registry: str,
    n: int,
    env: dict[str, str],
    peer: Callable[[], list[float]] | None,
    peer_name: str = "skopeo list-tags",
) -> None:
    walk = f"{repo}:step-{min(n, 1000) * 100}"
    cases: list[tuple[str, list[str], str]] = [
        (f"registry ls ({n} tags)", trainops("registry", "ls", repo), "≤ 1 s (oci: ≤ 1.5× skopeo)"),
        (f"registry ls -l ({n} tags)", trainops("registry", "ls", "-l", repo), "informational"),
        (f"ckpt ls ({n} tags)", trainops("ckpt", "ls", repo), "≤ 1 s on file://"),
        (f"ckpt latest ({n} tags)", trainops("ckpt", "latest", repo), "≤ 0.5 s"),
        (f"lineage up ({min(n, 1000)} checkpoints)", trainops("lineage", walk, "--format", "json"), "informational"),
        ("registry ls (repositories)", trainops("registry", "ls", registry), "informational"),
    ]
    peer_times = peer() if peer else None
    for name, cmd, goal in cases:
        if name.startswith("lineage"):  # a cold manifest cache each run
            shutil.rmtree(env["TRAINOPS_CACHE_DIR"], ignore_errors=True)
        cpu: list[float] = []
        times = timed(cmd, env, cpu)
        row = Timing(
            name,
            backend,
            round(statistics.median(times), 3),
            round(min(times), 3),
            round(max(times), 3),
            round(statistics.median(cpu), 3),
            goal=goal,
        )
        if peer_times and name.startswith("registry ls (") and "tags" in name:
            row.peer, row.peer_median = peer_name, round(statistics.median(peer_times), 3)
        rows.append(row)
        spread = f"({row.low:.2f}–{row.high:.2f})"
        print(f"  {backend:5} {name:34} {row.median:7.2f}s {spread:13} cpu {row.cpu:.2f}s", flush=True)


@contextmanager
def registry_service(work: Path) -> Iterator[DistributionRegistry]:
    reg = DistributionRegistry(work / "registry-data")
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


def bench_file(
    work: Path, items: list[tuple[str, ManifestData]], m: int, env: dict[str, str], rows: list[Timing]
) -> None:
    fill_file(work / "reg" / "bench" / "ckpt", items)
    for i in range(m):
        fill_file(work / "many" / f"r{i:04d}", items[:1])
    measure(rows, "file", f"file://{work}/reg/bench/ckpt", f"file://{work}/many", len(items), env, None)


def bench_oci(
    work: Path, items: list[tuple[str, ManifestData]], m: int, env: dict[str, str], rows: list[Timing]
) -> None:
    with registry_service(work) as reg:
        backend = open_backend(RegistryRoot("oci", reg.host, ""), insecure=True)
        fill_remote(backend, "bench/ckpt", items)
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda i: fill_remote(backend, f"many/r{i:04d}", items[:1]), range(m)))
        env = {**env, "TRAINOPS_INSECURE_REGISTRIES": reg.host}
        skopeo = ["skopeo", "list-tags", "--tls-verify=false", f"docker://{reg.host}/bench/ckpt"]
        measure(
            rows,
            "oci",
            f"oci://{reg.host}/bench/ckpt",
            f"oci://{reg.host}/many",
            len(items),
            env,
            lambda: timed(skopeo, env),
        )


def bench_s3(
    work: Path, items: list[tuple[str, ManifestData]], m: int, env: dict[str, str], rows: list[Timing]
) -> None:
    s3 = MotoS3(work / "moto")
    s3.start()
    try:
        bucket = s3.new_bucket()
        env = {**env, **s3.env}
        os.environ.update(s3.env)
        backend = open_backend(RegistryRoot("s3", bucket, ""))
        fill_remote(backend, "bench/ckpt", items)
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda i: fill_remote(backend, f"many/r{i:04d}", items[:1]), range(m)))
        peer = [PY, "-c", BOTO3_LIST, bucket, "bench/ckpt/tags/"]
        measure(
            rows,
            "s3",
            f"s3://{bucket}/bench/ckpt",
            f"s3://{bucket}/many",
            len(items),
            env,
            lambda: timed(peer, env),
            "boto3 list_objects_v2 paginator",
        )
    finally:
        s3.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 tags, 20 repositories: seconds")
    parser.add_argument("--tags", type=int, default=None, help="checkpoints in the repository (10,000)")
    parser.add_argument("--repos", type=int, default=None, help="repositories in the registry (1,000)")
    parser.add_argument("--skip", action="append", default=[], choices=["oci", "s3", "file"])
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/scale.json")
    args = parser.parse_args()
    load = docresult.Load()
    n = args.tags or (200 if args.quick else 10_000)
    m = args.repos or (20 if args.quick else 1_000)
    RUNS[0] = 1 if args.quick else 3
    items = list(checkpoints(n))
    rows: list[Timing] = []
    benches = {"file": bench_file, "oci": bench_oci, "s3": bench_s3}
    with tempfile.TemporaryDirectory(prefix="trainops-scale-") as tmp:
        for name, bench in benches.items():
            if name in args.skip:
                continue
            work = Path(tmp) / name
            work.mkdir()
            env = {**os.environ, "TRAINOPS_CACHE_DIR": str(work / "cache"), "PYTHONPATH": str(ROOT)}
            print(f"{name}: {n} checkpoints, {m} repositories", flush=True)
            bench(work, items, m, env, rows)
    for r in rows:
        if r.ratio is not None:
            print(f"{r.backend} {r.name}: {r.ratio:.2f}× {r.peer} ({r.peer_median:.2f}s)")
    out = ROOT / "bench/results"
    summary = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "tags": n,
        "repositories": m,
        "runs": RUNS[0],
        "rows": [{**asdict(r), "ratio": r.ratio and round(r.ratio, 3)} for r in rows],
    }
    if not args.quick:  # a quick run checks that the benchmark runs: it writes no results
        out.mkdir(parents=True, exist_ok=True)
        (out / "scale.json").write_text(json.dumps(summary, indent=2))
    if args.doc and not args.quick:
        docresult.write(
            docresult.default_path("scale"),
            benchmark="scale",
            title=f"Listing {n:,} checkpoints and {m:,} repositories (median [min–max] of {RUNS[0]} runs)",
            load=load,
            columns=["command", "backend", "wall", "CPU", "peer", "ratio", "target"],
            rows=[
                [
                    f"`{r.name}`" if r.name.startswith(("registry", "ckpt")) else r.name,
                    f"{r.backend}://",
                    f"{r.median:.2f} s [{r.low:.2f}–{r.high:.2f}]",
                    f"{r.cpu:.2f} s",
                    f"{r.peer} {r.peer_median:.2f} s" if r.peer and r.peer_median is not None else "—",
                    f"{r.ratio:.2f}" if r.ratio is not None else "—",
                    r.goal or "—",
                ]
                for r in rows
            ],
        )


if __name__ == "__main__":
    main()
