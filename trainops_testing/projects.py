"""Projects for the tests and the benchmarks: examples/tiny-llm's manifest written with an
overlay, and a serving project with model releases pushed.

`write_variant` writes the example with an overlay merged over it (the semantics of
trainops.yaml environments). `make_project` makes a directory holding that manifest
(file:// registry and a bare GitOps repo beside it) with three model artifacts pushed as
releases v1..v3 and one checkpoint. `slo_overlay` declares SLOs with windows short enough
for the alert loop to fire in seconds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.cli import run
from trainops_testing.services import bare_git_repo

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "tiny-llm" / "trainops.yaml"
IMAGE = "harbor.example.com/llm/tiny-llm/serve-vllm@sha256:" + "ab" * 32  # the serving image the projects start
FAST_SLO = {"window": "1h"}  # the page's windows: 1h/5m scaled by 1h/30d → 5s (and 4 scrapes: 4s)


def merge(base: Any, overlay: Any) -> Any:
    """Overlay semantics of trainops.yaml environments: mappings merge, lists replace, None removes."""
    if not isinstance(base, dict) or not isinstance(overlay, dict):
        return copy.deepcopy(overlay)
    out = dict(base)
    for key, value in overlay.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def example_data() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def write_variant(directory: Path, overlay: dict[str, Any] | None = None, *, name: str = "trainops.yaml") -> Path:
    """The example with `overlay` merged over it (environments dropped unless the overlay sets them)."""
    data = merge(example_data(), overlay or {})
    if overlay is None or "environments" not in overlay:
        data.pop("environments", None)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Project:
    root: Path
    manifest: Path
    gitops: Path  # the bare GitOps repository

    def cli(self, *args: str) -> list[str]:
        return [*args, "-f", str(self.manifest)]


def push_model(project: Path, manifest: Path, name: str, content: str, kind: str = "model") -> None:
    source = project / "sources" / name.replace(":", "-").replace("/", "-")
    source.mkdir(parents=True)
    (source / "config.json").write_text(content)
    outcome = run("push", str(source), name, "--kind", kind, "-f", str(manifest))
    assert outcome.code == 0, outcome.stderr


def make_project(root: Path, overlay: dict[str, object] | None = None) -> Project:
    spec = {
        "registry": "file://.trainops/registry",
        "gitops": {"repo": "file://gitops.git", "branch": "main", "path": "clusters/dev"},
    }
    data: dict[str, object] = {"spec": spec}
    if overlay:
        data = {"spec": {**spec, **dict(overlay.get("spec", {}))}}  # type: ignore[arg-type]
    manifest = write_variant(root, data)
    gitops = bare_git_repo(root / "gitops.git")
    for tag, content in (("v1", '{"v": 1}'), ("v2", '{"v": 2}'), ("v3", '{"v": 3}')):
        push_model(root, manifest, f"tiny-llm/model:{tag}", content)
    push_model(root, manifest, "tiny-llm/checkpoints:step-1", '{"c": 1}', kind="checkpoint")
    return Project(root, manifest, gitops)


def slo_overlay(prometheus: str) -> dict[str, Any]:
    """Serving SLOs for tiny-llm judged by `prometheus` alone (no analysis), on windows of
    seconds, and a canary pausing 3 s on each step."""
    pause = {"pause": "3s"}
    return {
        "spec": {
            "rollout": {
                "analysis": None,  # the SLOs alone judge the canary
                "canary": {"steps": [{"weight": 10, **pause}, {"weight": 50, **pause}, {"weight": 100}]},
            },
            "slo": {
                "prometheus": prometheus,
                "scrapeInterval": "1s",
                "evaluationInterval": "1s",
                "canaryWindow": "3s",
                "serving": [
                    {
                        "model": "tiny-llm",
                        "availability": {"objective": 99.9, **FAST_SLO},
                        "latency": [
                            {"metric": "ttft", "objective": 99, "threshold": "1s", **FAST_SLO},
                            {"metric": "itl", "objective": 99, **FAST_SLO},
                        ],
                    }
                ],
                "training": None,
            },
        }
    }
