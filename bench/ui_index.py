"""The registry browser at scale: its SQLite index against reading the registry directly.

Builds a file:// registry of R repositories x N checkpoints (default 4 x 2500 = 10,000
artifacts; each with two files, lineage to the previous checkpoint, step and metrics),
written straight as OCI image layouts so that making the data takes seconds. Then:

- **index**: `trainops ui` (its own process) builds the index (cold) and serves it; then a
  refresh of the same registry (warm: tags listed with their digests, nothing new fetched), and a
  restart on the filled index (served at once, refreshed in the background).
- **pages**: through that server over loopback HTTP, a repository's tag page (100 rows, at
  random pages) and an artifact page (random artifacts), as HTML and as /api JSON: median,
  p95 and max of each. Targets: a page ≤ 300 ms, an artifact ≤ 100 ms.
- **peer**: the same listing and artifact without the index: `trainops registry ls REPO`
  and `trainops registry show REF` (each its own process, reading the registry).

    python bench/ui_index.py            # 10,000 artifacts
    python bench/ui_index.py --quick    # 2 x 250, seconds
    python bench/ui_index.py --check    # exit 1 when a target is missed

Writes bench/results/ui_index.json (bench/results/ is not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "ui_index.json"

from harness import docresult  # noqa: E402

from trainops.registry import media  # noqa: E402
from trainops.registry.artifact import FileEntry, build_manifest, canonical_json, config_blob, layer_descriptor  # noqa: E402
from trainops.registry.backends.base import Descriptor, sha256_digest  # noqa: E402
from trainops.registry.context import Registries  # noqa: E402
from trainops.registry.lineage_data import Lineage, Parent  # noqa: E402
from trainops.ui.index import Index, refresh  # noqa: E402
from trainops_testing.services import free_port, wait_for  # noqa: E402

PAGE_TARGET_MS = 300.0
ARTIFACT_TARGET_MS = 100.0


def _blob(layout: Path, data: bytes) -> str:
    digest = sha256_digest(data)
    path = layout / "blobs" / "sha256" / digest[7:]
    if not path.exists():
        path.write_bytes(data)
    return digest


def make_repository(layout: Path, url: str, count: int) -> list[str]:
    """An OCI image layout of `count` checkpoints tagged step-N; their manifest digests."""
    (layout / "blobs" / "sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": media.OCI_LAYOUT_VERSION}))
    shared = b'{"optimizer": "adamw"}'
    entries, digests = [], []
    parent: Parent | None = None
    for i in range(1, count + 1):
        weights = f"weights of step {i}".encode()
        layers = [
            layer_descriptor(
                FileEntry("model.safetensors", layout, len(weights), 0, False), _blob(layout, weights), "checkpoint"
            ),
            layer_descriptor(
                FileEntry("trainer_state.json", layout, len(shared), 0, False), _blob(layout, shared), "checkpoint"
            ),
        ]
        lineage = Lineage(
            git_commit="0123456789abcdef0123456789abcdef01234567",
            run_id="bench",
            step=i * 10,
            metrics={"loss": 4.0 / (1 + i / 100), "lr": 0.001},
            parents=[parent] if parent else [],
        )
        created = "2026-12-01T00:00:00Z"
        config, config_type = config_blob("checkpoint", created, lineage, layers)
        config_digest = _blob(layout, config)
        manifest = build_manifest(
            kind="checkpoint",
            config=Descriptor(config_type, config_digest, len(config)),
            layers=layers,
            created=created,
            lineage=lineage,
            annotations={},
        )
        _blob(layout, manifest.data)
        entries.append(
            {
                "mediaType": media.OCI_MANIFEST,
                "digest": manifest.digest,
                "size": len(manifest.data),
                "artifactType": media.ARTIFACT_TYPES["checkpoint"],
                "annotations": {media.A_REF_NAME: f"step-{i * 10}"},
            }
        )
        digests.append(manifest.digest)
        parent = Parent(digest=manifest.digest, ref=f"{url}:step-{i * 10}", relation="resumed-from")
    index = {"schemaVersion": 2, "mediaType": media.OCI_INDEX, "manifests": entries}
    (layout / "index.json").write_bytes(canonical_json(index))
    return digests


class UiServer:
    """`trainops ui` in its own process; start() returns the seconds until it answered."""

    def __init__(self, registry: str, index: Path, work: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", "trainops.cli.main", "ui", "--registry", registry]
        self.argv += ["--port", str(self.port), "--refresh", "0", "--index", str(index)]
        self.log = work / f"ui-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = {**os.environ, "TRAINOPS_CACHE_DIR": str(work / "cache")}

    def start(self) -> float:
        started = time.perf_counter()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        wait_for(
            lambda: _get(self.base + "/api/repositories") > 0,
            timeout=3600,
            what="trainops ui",
            proc=self.proc,
            log_path=self.log,
        )
        return time.perf_counter() - started

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return len(resp.read())


def _timed_get(url: str) -> float:
    started = time.perf_counter()
    _get(url)
    return (time.perf_counter() - started) * 1000


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 1),
        "max_ms": round(ordered[-1], 1),
        "n": len(ordered),
    }


def _process_ms(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=REPO, check=True, capture_output=True, timeout=3600)
    return (time.perf_counter() - started) * 1000


def measure(
    server: UiServer, repos: list[str], digests: dict[str, list[str]], samples: int
) -> dict[str, dict[str, float]]:
    rng = random.Random(7)
    per_page = 100
    out: dict[str, list[float]] = {
        "page_html": [],
        "page_api": [],
        "artifact_html": [],
        "artifact_api": [],
        "lineage_api": [],
        "curve_api": [],
    }
    for _ in range(samples):
        repo = rng.choice(repos)
        pages = max(1, len(digests[repo]) // per_page)
        page = rng.randint(1, pages)
        q = quote(repo, safe="")
        out["page_html"].append(_timed_get(f"{server.base}/repository?repository={q}&page={page}"))
        out["page_api"].append(_timed_get(f"{server.base}/api/tags?repository={q}&page={page}&perPage={per_page}"))
        digest = rng.choice(digests[repo])
        out["artifact_html"].append(_timed_get(f"{server.base}/artifact/{digest}?repository={q}"))
        out["artifact_api"].append(_timed_get(f"{server.base}/api/artifacts/{digest}?repository={q}"))
        # no targets: the graph of a long run (bounded to 400 nodes), every checkpoint's point
        out["lineage_api"].append(_timed_get(f"{server.base}/api/lineage/{digest}"))
        out["curve_api"].append(_timed_get(f"{server.base}/api/curve?repository={q}"))
    return {name: _stats(values) for name, values in out.items()}


def main() -> int:
    """Parse the options, run the bench in a temporary directory, remove it."""
    args = _options()
    work = Path(tempfile.mkdtemp(prefix="trainops-bench-ui-"))
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=int, default=4)
    parser.add_argument("--per-repo", type=int, default=2500)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="2 repositories x 250 artifacts, 10 samples")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where to write the JSON results")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/ui_index.json")
    args = parser.parse_args()
    args.load = docresult.Load()
    if args.quick:
        args.repos, args.per_repo, args.samples = 2, 250, 10
    return args


def run(args: argparse.Namespace, work: Path) -> int:
    registry = work / "registry"
    made = time.perf_counter()
    digests: dict[str, list[str]] = {}
    for r in range(args.repos):
        url = f"file://{registry}/team/model-{r}/checkpoints"
        digests[url] = make_repository(Path(url[7:]), url, args.per_repo)
    made_s = time.perf_counter() - made
    total = args.repos * args.per_repo
    print(f"made {total} artifacts in {args.repos} repositories in {made_s:.1f} s ({work})", flush=True)

    server = UiServer(f"file://{registry}", work / "index.sqlite", work)
    cold = server.start()
    print(f"index built (cold) and serving after {cold:.1f} s", flush=True)
    try:
        pages = measure(server, list(digests), digests, args.samples)
    finally:
        server.stop()
    # warm: the same index, nothing changed in the registry (every tag is checked, nothing fetched)
    with Registries() as registries:
        warm_result = refresh(Index(work / "index.sqlite"), registries, urls=[f"file://{registry}"])
    warm = warm_result.seconds
    assert warm_result.artifacts_added == 0, warm_result
    print(f"warm refresh (nothing new) {warm:.1f} s", flush=True)
    server = UiServer(f"file://{registry}", work / "index.sqlite", work)
    restart = server.start()
    server.stop()
    print(f"restart on a filled index: serving after {restart:.1f} s (refreshes in the background)", flush=True)

    repo = next(iter(digests))
    env = {**os.environ, "TRAINOPS_CACHE_DIR": str(work / "cache-peer")}
    base = [sys.executable, "-m", "trainops.cli.main", "registry"]
    peer_ls = _process_ms([*base, "ls", repo, "-o", "json"], env)
    peer_show = _process_ms([*base, "show", f"{repo}@{digests[repo][len(digests[repo]) // 2]}", "-o", "json"], env)
    startup = _process_ms([sys.executable, "-m", "trainops.cli.main", "--version"], env)

    ok_page = pages["page_html"]["median_ms"] <= PAGE_TARGET_MS and pages["page_api"]["median_ms"] <= PAGE_TARGET_MS
    ok_artifact = (
        pages["artifact_html"]["median_ms"] <= ARTIFACT_TARGET_MS
        and pages["artifact_api"]["median_ms"] <= ARTIFACT_TARGET_MS
    )
    result = {
        "artifacts": total,
        "repositories": args.repos,
        "made_seconds": round(made_s, 2),
        "index_cold_seconds": round(cold, 2),
        "index_warm_seconds": round(warm, 2),
        "restart_seconds": round(restart, 2),
        "pages": pages,
        "peer": {
            "registry_ls_ms": round(peer_ls, 1),
            "registry_show_ms": round(peer_show, 1),
            "trainops_startup_ms": round(startup, 1),
            "per_repository": args.per_repo,
        },
        "targets": {
            "page_ms": PAGE_TARGET_MS,
            "artifact_ms": ARTIFACT_TARGET_MS,
            "page_ok": ok_page,
            "artifact_ok": ok_artifact,
        },
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{total} artifacts; index cold {cold:.1f} s (start-up included), warm refresh {warm:.1f} s")
    print(f"restart on the filled index: serving after {restart:.1f} s")
    print(f"{'request':<16}{'median':>10}{'p95':>10}{'max':>10}  target")
    for name, stats in pages.items():
        times = f"{stats['median_ms']:>8.1f}ms{stats['p95_ms']:>8.1f}ms{stats['max_ms']:>8.1f}ms"
        if name.startswith(("page", "artifact")):
            target = PAGE_TARGET_MS if name.startswith("page") else ARTIFACT_TARGET_MS
            mark = "ok" if stats["median_ms"] <= target else "MISSED"
            print(f"{name:<16}{times}  ≤ {target:.0f} ms {mark}")
        else:
            print(f"{name:<16}{times}")
    peer = f"`registry ls` of {args.per_repo} tags {peer_ls:.0f} ms, `registry show` {peer_show:.0f} ms"
    print(f"peer without the index: {peer}")
    print(f"(trainops start-up alone: {startup:.0f} ms)  → {args.results}")
    if args.doc and not args.quick:
        _write_doc(args, result)
    return 1 if args.check and not (ok_page and ok_artifact) else 0


def _write_doc(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """The committed results (docs/operations/results/ui_index.json) the performance page shows."""
    pages, peer = result["pages"], result["peer"]

    def timed(name: str) -> str:
        html, api = pages[f"{name}_html"], pages[f"{name}_api"]
        return f"HTML {html['median_ms']} ms median (p95 {html['p95_ms']} ms), JSON {api['median_ms']} ms"

    mark = {True: "✓", False: "✗"}
    page_ratio = pages["page_html"]["median_ms"] / peer["registry_ls_ms"]
    artifact_ratio = pages["artifact_html"]["median_ms"] / peer["registry_show_ms"]
    docresult.write(
        docresult.default_path("ui_index"),
        benchmark="ui_index",
        title=f"The registry browser on {result['artifacts']:,} artifacts (HTTP over loopback)",
        load=args.load,
        columns=["benchmark", "trainops", "peer", "ratio", "target"],
        rows=[
            [
                "a tag page of 100 rows",
                timed("page"),
                f"`trainops registry ls` of the same {args.per_repo:,}-tag repository, no index: "
                f"{peer['registry_ls_ms']:.0f} ms",
                f"{page_ratio:.3f}",
                f"≤ {PAGE_TARGET_MS:.0f} ms {mark[result['targets']['page_ok']]}",
            ],
            [
                "an artifact page",
                timed("artifact"),
                f"`trainops registry show`, no index: {peer['registry_show_ms']:.0f} ms",
                f"{artifact_ratio:.3f}",
                f"≤ {ARTIFACT_TARGET_MS:.0f} ms {mark[result['targets']['artifact_ok']]}",
            ],
            [
                f"building the index of {result['artifacts']:,} artifacts on file://",
                f"cold {result['index_cold_seconds']} s (start-up included); warm refresh (nothing new) "
                f"{result['index_warm_seconds']} s; restart on a filled index serves in {result['restart_seconds']} s",
                "—",
                "—",
                "—",
            ],
        ],
    )


if __name__ == "__main__":
    raise SystemExit(main())
