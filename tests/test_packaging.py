"""The wheel works on its own: built, installed in a fresh venv, run outside the source tree.

The venv sees the system site-packages (so the dependencies need not be downloaded again),
and the wheel is installed into it with --no-deps; every check makes sure the trainops that
runs is the venv's copy, not the editable checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
MARKER = "# rendered from the template installed with the wheel\n"


@dataclass(frozen=True)
class Installed:
    venv: Path
    site_packages: Path
    python: Path
    trainops: Path
    work: Path  # a directory outside the repository to run from
    wheel: Path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRAINOPS_DEBUG")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _run(args: Sequence[str | Path], *, cwd: Path, timeout: float = 300) -> str:
    proc = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(),
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _outside_repo(path: Path) -> bool:
    return not path.resolve().is_relative_to(REPO)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("packaging")
    assert _outside_repo(root), f"{root} is inside {REPO}"
    dist, work = root / "dist", root / "work"
    work.mkdir()
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, REPO], cwd=work)
    [wheel] = dist.glob("trainops-*.whl")

    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", venv], cwd=work)
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "--no-deps", "--no-index", wheel], cwd=work)
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=work).strip())
    return Installed(venv, site, python, venv / "bin" / "trainops", work, wheel)


def test_wheel_contents(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    for template in ("gitignore.j2", "trainops.yaml.j2", "workflow.yml.j2"):
        assert f"trainops/_templates/project/{template}" in names
    assert "trainops/cli/main.py" in names
    assert "trainops/_templates/slurm/sbatch.sh.j2" in names
    for crd in ("volcano-batch-job", "kueue-clusterqueue", "kubeflow-pytorchjob", "volcano-scheduling-queue"):
        assert f"trainops/render/crds/{crd}.yaml" in names  # validate --render needs no checkout
    assert not [n for n in names if n.startswith(("tests/", "examples/", "bench/", "templates/"))]
    # the registry browser works offline: its templates and bundled JS/CSS are in the wheel
    assert "trainops/_templates/ui/lineage.html" in names
    for asset in (
        "app.js",
        "app.css",
        "vendor/cytoscape.min.js",
        "vendor/cytoscape-dagre.min.js",
        "vendor/uPlot.iife.min.js",
    ):
        assert f"trainops/ui/static/{asset}" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(installed.wheel) as wheel:
        assert "trainops = trainops.cli.main:entrypoint" in wheel.read(entry_points).decode()


def test_the_venv_runs_its_own_trainops(installed: Installed) -> None:
    probe = (
        "import json, importlib.metadata as md, trainops, trainops.templating as t\n"
        "dist = md.distribution('trainops')\n"
        "print(json.dumps({'module': trainops.__file__, 'templates': str(t.template_root()),"
        " 'dist': str(dist.locate_file('')), 'direct_url': dist.read_text('direct_url.json')}))\n"
    )
    found = json.loads(_run([installed.python, "-c", probe], cwd=installed.work))
    package = installed.site_packages / "trainops"
    assert Path(found["module"]) == package / "__init__.py"
    assert Path(found["templates"]) == package / "_templates"
    assert Path(found["dist"]) == installed.site_packages
    assert '"editable": true' not in (found["direct_url"] or "")
    assert _outside_repo(Path(found["module"]))


def test_init_and_validate_from_the_installed_wheel(installed: Installed, tmp_path: Path) -> None:
    assert _outside_repo(tmp_path)
    # Mark the installed template: the file init writes must come from it.
    template = installed.site_packages / "trainops" / "_templates" / "project" / "trainops.yaml.j2"
    if MARKER not in template.read_text(encoding="utf-8"):
        with template.open("a", encoding="utf-8") as fh:
            fh.write(MARKER)

    project = tmp_path / "demo-project"
    out = _run([installed.trainops, "init", project], cwd=installed.work)
    assert f"wrote   {project / 'trainops.yaml'}" in out.splitlines()
    manifest = project / "trainops.yaml"
    assert manifest.read_text(encoding="utf-8").endswith(MARKER)
    assert (project / ".gitignore").is_file()
    assert (project / ".github" / "workflows" / "trainops.yml").is_file()

    out = _run([installed.trainops, "validate", "-f", manifest], cwd=installed.work)
    assert out == f"{manifest} is valid; environments checked: dev, prod\n"
    rendered = _run([installed.trainops, "validate", "--render", "-f", manifest], cwd=installed.work)
    assert "checked against the CRDs" in rendered, rendered
    version = _run([installed.trainops, "--version"], cwd=installed.work)
    assert version.startswith("trainops, version ")
