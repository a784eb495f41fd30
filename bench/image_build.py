"""Image builds: a code-only change rebuilt with the layer builder versus the docker builder.

Same project (examples/tiny-llm's code, in a fresh git repository), same base (the test
suite's static-busybox image, pushed to a Distribution registry as a Docker v2 image), same
registry, one run. Starts its own registry and Podman API service on free loopback ports
(the helpers the tests use); nothing is pulled from the internet.

1. warm-up: both builders build and push the project once (the engine's layer cache and
   the registry are warm, as in CI after the first commit);
2. a one-line change to a Python file is committed;
3. timed: `trainops image build --push` with --builder layer, then with --builder docker
   (Podman API), each a separate process: wall time and peak RSS (GNU time). For the docker
   builder the build runs in the engine, so the engine service's own peak RSS over the
   build (VmHWM, reset before) is reported too;
4. timed: both again with nothing changed (the inputs digest is in the registry: skipped).

    python bench/image_build.py            # prints a table, writes bench/results/image_build.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.services import DistributionRegistry, PodmanService, build_busybox_image, git_env  # noqa: E402

EXAMPLE = ROOT / "examples" / "tiny-llm"
SETUP = "find /workspace -name '*.py' | wc -l > /tmp/python-files"  # a step after COPY, as pip install is


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    skipped: bool
    digest: str | None
    engine_peak_rss_mb: float | None = None


def _vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _reset_hwm(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def build(manifest: Path, builder: str, env: dict[str, str], engine_pid: int | None = None) -> Run:
    cmd = [sys.executable, "-m", "trainops.cli.main", "image", "build", "-f", str(manifest)]
    cmd += ["--push", "--builder", builder, "-o", "json"]
    reset = engine_pid is not None and _reset_hwm(engine_pid)
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    err = proc.stderr.decode()
    if proc.returncode != 0:
        raise SystemExit(f"trainops image build --builder {builder} failed ({proc.returncode}):\n{err}")
    result = json.loads(proc.stdout)
    engine = _vm_hwm_mb(engine_pid) if reset and engine_pid is not None else None
    peak_kb = int(err.strip().splitlines()[-1])
    return Run(round(elapsed, 3), round(peak_kb / 1024, 1), bool(result["skipped"]), result["digest"], engine)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=git_env(), capture_output=True)


def make_project(work: Path, registry: str, base: str) -> Path:
    project = work / "tiny-llm"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns("checkpoints", "__pycache__", "*.egg-info", ".trainops", "trainops.yaml"),
    )
    (project / "trainops.yaml").write_text(
        "apiVersion: trainops.dev/v1alpha1\n"
        "kind: Pipeline\n"
        "metadata: {name: tiny-llm}\n"
        "spec:\n"
        f"  registry: oci://{registry}/bench\n"
        f'  insecureRegistries: ["{registry}"]\n'
        "  image:\n"
        "    template: train-pytorch\n"
        f"    base: {base}\n"
        '    include: ["tiny_llm/**", "data/**", "pyproject.toml"]\n'
        '    exclude: ["**/__pycache__/**", "checkpoints/**"]\n'
        # the busybox base has no Python: trainops is not pip-installed into it (trainopsRequirement
        # empty), as for a base that brings its own
        "    params: "
        + json.dumps(
            {"installPytorch": False, "installProject": False, "trainopsRequirement": "", "setupCommand": SETUP}
        )
        + "\n"
    )
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "tiny-llm")
    return project / "trainops.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="Keep the work directory.")
    parser.add_argument(
        "--quick", action="store_true", help="Check that it runs (the same builds, no warm-up); writes no results."
    )
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/image_build.json")
    args = parser.parse_args()
    load = docresult.Load()
    work = Path(tempfile.mkdtemp(prefix="trainops-bench-image-"))
    reg = DistributionRegistry(work / "registry")
    svc: PodmanService | None = None
    try:
        reg.start()
        svc = PodmanService(work / "podman", insecure_registries=[reg.host])
        svc.start()
        client = svc.client()
        try:
            local = build_busybox_image(client, context_dir=work / "busybox-ctx")
        finally:
            client.close()
        base = f"{reg.host}/base/busybox:1"
        svc.podman("push", "--quiet", "--format", "v2s2", local, base)
        manifest = make_project(work, reg.host, base)
        env = {**svc.subprocess_env(), "TRAINOPS_CACHE_DIR": str(work / "cache")}
        env.pop("SOURCE_DATE_EPOCH", None)
        assert svc.proc is not None
        engine_pid = svc.proc.pid

        warm = {b: build(manifest, b, env) for b in ("layer", "docker")}
        model = manifest.parent / "tiny_llm" / "model.py"
        model.write_text(model.read_text() + "# a code-only change\n")
        git(manifest.parent, "commit", "-q", "-am", "code-only change")
        changed = {
            "layer": build(manifest, "layer", env),
            "docker": build(manifest, "docker", env, engine_pid),
        }
        unchanged = {b: build(manifest, b, env) for b in ("layer", "docker")}
        for name, runs in (("changed", changed), ("unchanged", unchanged)):
            expect_skip = name == "unchanged"
            if any(r.skipped != expect_skip for r in runs.values()):
                raise SystemExit(f"{name}: expected skipped={expect_skip}, got {runs}")

        ratio = changed["docker"].seconds / changed["layer"].seconds
        files = sum(1 for p in (manifest.parent / "tiny_llm").rglob("*.py"))
        report: dict[str, Any] = {
            "benchmark": "image_build",
            "scenario": "code-only change (one line of tiny_llm/model.py), rebuilt and pushed to Distribution",
            "project": {"source": "examples/tiny-llm", "python_files": files},
            "base": base,
            "warmup": {k: asdict(v) for k, v in warm.items()},
            "code_change": {k: asdict(v) for k, v in changed.items()},
            "unchanged_rebuild": {k: asdict(v) for k, v in unchanged.items()},
            "ratio_docker_over_layer": round(ratio, 2),
            "ratio_unchanged_docker_over_layer": round(unchanged["docker"].seconds / unchanged["layer"].seconds, 2),
            "machine": {
                "python": platform.python_version(),
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "podman": svc.podman("version", "--format", "{{.Client.Version}}").stdout.strip(),
            },
        }
        out = ROOT / "bench" / "results" / "image_build.json"
        if not args.quick:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=2) + "\n")
        rows = [
            ("code change", "layer", changed["layer"]),
            ("code change", "docker (Podman API)", changed["docker"]),
            ("unchanged", "layer", unchanged["layer"]),
            ("unchanged", "docker (Podman API)", unchanged["docker"]),
        ]
        print(f"{'rebuild':<12} {'builder':<20} {'seconds':>8} {'peak RSS MiB':>13} {'engine RSS MiB':>15}")
        for what, builder, r in rows:
            engine = f"{r.engine_peak_rss_mb:.1f}" if r.engine_peak_rss_mb is not None else "-"
            print(f"{what:<12} {builder:<20} {r.seconds:>8.2f} {r.peak_rss_mb:>13.1f} {engine:>15}")
        print(f"docker / layer time ratio after a code change: {ratio:.2f}x")
        if not args.quick:
            print(f"wrote {out.relative_to(ROOT)}")
        if args.doc and not args.quick:
            docresult.write(
                docresult.default_path("image_build"),
                benchmark="image_build",
                title="A code-only change rebuilt and pushed, with the layer and docker builders",
                load=load,
                columns=["benchmark", "trainops", "peer", "ratio", "target"],
                rows=[
                    [
                        "code-only image rebuild, pushed",
                        f"`layer` builder {changed['layer'].seconds:.2f} s, {changed['layer'].peak_rss_mb:.0f} MiB",
                        f"`docker` builder on Podman's API {changed['docker'].seconds:.2f} s",
                        f"{1 / ratio:.2f} ({ratio:.1f}× faster)",
                        f"≥ 5× {'✓' if ratio >= 5 else '✗'}",
                    ],
                    [
                        "unchanged image rebuild (skipped by inputs digest)",
                        f"`layer` {unchanged['layer'].seconds:.2f} s",
                        f"`docker` {unchanged['docker'].seconds:.2f} s",
                        f"{unchanged['layer'].seconds / unchanged['docker'].seconds:.2f}",
                        "—",
                    ],
                ],
            )
    finally:
        if svc is not None:
            svc.stop()
        reg.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
