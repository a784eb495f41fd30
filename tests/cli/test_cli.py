"""The `trainops` command line: exit codes, streams, JSON output, plan, init, import weight.

Most tests call `trainops.cli.main.main(ARGS)` (which returns the exit code) inside click's
isolation; the few that need a fresh interpreter run `python -m trainops.cli.main`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainops import __version__
from trainops.manifest import check_manifest
from trainops_testing.cli import REPO, run, run_subprocess

EXAMPLE = REPO / "examples" / "tiny-llm" / "trainops.yaml"
GOLDEN = REPO / "tests" / "golden" / "plan-tiny-llm.json"
UPDATE_GOLDEN = os.environ.get("TRAINOPS_UPDATE_GOLDEN") == "1"


def python(code: str, *, cwd: Path = REPO) -> str:
    """Run `python -c CODE` in a fresh interpreter; its stdout."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRAINOPS_DEBUG in a developer's shell would turn user errors into tracebacks."""
    monkeypatch.delenv("TRAINOPS_DEBUG", raising=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


INVALID = """\
apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata:
  name: demo
spec:
  image: {}
  train:
    command: [python]
    schedular: volcano
    nodes: two
"""


# --- version, help --------------------------------------------------------------------------


def test_version() -> None:
    result = run("--version")
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == f"trainops, version {__version__}\n"


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_the_commands(flag: str) -> None:
    result = run(flag)
    assert result.code == 0
    assert result.stderr == ""
    assert result.stdout.startswith("Usage: trainops [OPTIONS] COMMAND [ARGS]...")
    commands = result.stdout.split("Commands:", 1)[1]
    for name in ("init", "plan", "schema", "validate"):
        assert f"\n  {name} " in commands


def test_help_of_a_command() -> None:
    result = run("validate", "--help")
    assert result.code == 0
    assert "Usage: trainops validate [OPTIONS]" in result.stdout
    assert "-f, --file" in result.stdout and "--env ENV" in result.stdout


def test_usage_error_exits_2() -> None:
    result = run("validate", "--bogus")
    assert result.code == 2
    assert result.stdout == ""
    assert result.last_error_line.startswith("Error: No such option")
    assert "--bogus" in result.last_error_line


def test_unknown_command_exits_2() -> None:
    result = run("valdiate")
    assert result.code == 2
    assert "No such command 'valdiate'" in result.stderr


# --- validate -------------------------------------------------------------------------------


def test_validate_ok() -> None:
    result = run("validate", "-f", str(EXAMPLE))
    assert (result.code, result.stderr) == (0, "")
    assert (
        result.stdout
        == f"{EXAMPLE} is valid; environments checked: dev, dev-strict, dev-signed, slurm-local, prod, disagg\n"
    )


def test_validate_defaults_to_trainops_yaml_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "trainops.yaml", EXAMPLE.read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    result = run("validate")
    assert result.code == 0
    assert (
        result.stdout
        == "trainops.yaml is valid; environments checked: dev, dev-strict, dev-signed, slurm-local, prod, disagg\n"
    )


def test_validate_invalid(tmp_path: Path) -> None:
    path = write(tmp_path / "trainops.yaml", INVALID)
    result = run("validate", "-f", str(path))
    assert result.code == 3
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}:9:5: spec.train.schedular: unknown field 'schedular'; did you mean 'scheduler'?",
        f"{path}:10:12: spec.train.nodes: should be a valid integer (got 'two')",
        "Error: 2 problems in the manifest; fix them and run `trainops validate` again",
    ]
    assert result.last_error_line.startswith("Error: ")
    assert "Traceback" not in result.stderr


def test_validate_invalid_yaml(tmp_path: Path) -> None:
    path = write(tmp_path / "trainops.yaml", "a: [1, 2\n")
    result = run("validate", "-f", str(path))
    assert result.code == 3
    assert result.last_error_line.startswith(f"Error: {path}:2:1: invalid YAML: ")
    assert "Traceback" not in result.stderr


def test_validate_json_ok() -> None:
    result = run("validate", "-f", str(EXAMPLE), "-o", "json")
    assert (result.code, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {
        "file": str(EXAMPLE),
        "ok": True,
        "environments": ["dev", "dev-strict", "dev-signed", "slurm-local", "prod", "disagg"],
        "problems": [],
        "render": None,  # not asked for (--render)
        "cluster": None,  # no cluster asked (--kubeconfig, --cluster)
    }


def test_validate_json_invalid_exits_3(tmp_path: Path) -> None:
    path = write(tmp_path / "trainops.yaml", INVALID)
    result = run("validate", "-f", str(path), "-o", "json")
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["problems"] == [
        {
            "file": str(path),
            "line": 9,
            "column": 5,
            "path": "spec.train.schedular",
            "message": "unknown field 'schedular'; did you mean 'scheduler'?",
            "env": None,
        },
        {
            "file": str(path),
            "line": 10,
            "column": 12,
            "path": "spec.train.nodes",
            "message": "should be a valid integer (got 'two')",
            "env": None,
        },
    ]
    assert result.code == 3, "an invalid manifest must fail CI with -o json as well"


def test_validate_json_invalid_exits_3_as_a_process(tmp_path: Path) -> None:
    path = write(tmp_path / "trainops.yaml", INVALID)
    result = run_subprocess(["validate", "-f", str(path), "-o", "json"])
    assert json.loads(result.stdout)["ok"] is False
    assert result.code == 3


def test_validate_missing_file_exits_4_with_a_hint(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = run("validate", "-f", str(missing))
    assert result.code == 4
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"Error: no manifest at {missing}; pass -f FILE, or create one with `trainops init`"
    ]
    assert "trainops init" in result.last_error_line


def test_validate_unknown_env_exits_4() -> None:
    result = run("validate", "-f", str(EXAMPLE), "--env", "prd")
    assert result.code == 4
    assert result.stderr.splitlines() == [f"Error: environment 'prd' is not defined in {EXAMPLE}; did you mean 'prod'?"]


def test_user_errors_never_show_a_traceback_in_a_process(tmp_path: Path) -> None:
    path = write(tmp_path / "trainops.yaml", INVALID)
    for args, code in ((["validate", "-f", str(path)], 3), (["plan", "-f", "nope.yaml"], 4)):
        result = run_subprocess(args, cwd=tmp_path)
        assert result.code == code
        assert "Traceback" not in result.stderr
        assert result.last_error_line.startswith("Error: ")


def test_trainops_debug_shows_the_traceback_of_a_user_error(tmp_path: Path) -> None:
    result = run_subprocess(["validate", "-f", "nope.yaml"], env={"TRAINOPS_DEBUG": "1"}, cwd=tmp_path)
    assert result.code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "trainops.errors.NotFoundError: no manifest at nope.yaml" in result.stderr


# --- plan -----------------------------------------------------------------------------------


def _normalized_plan(stdout: str) -> dict[str, Any]:
    plan = json.loads(stdout)
    assert plan["manifest"] == str(EXAMPLE.resolve())
    plan["manifest"] = EXAMPLE.relative_to(REPO).as_posix()
    return dict(plan)


def test_plan_json_matches_the_golden_file() -> None:
    result = run("plan", "-f", str(EXAMPLE), "-o", "json")
    assert (result.code, result.stderr) == (0, "")
    plan = _normalized_plan(result.stdout)
    text = json.dumps(plan, indent=2, ensure_ascii=False) + "\n"
    if UPDATE_GOLDEN:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.is_file(), f"no {GOLDEN}: run with TRAINOPS_UPDATE_GOLDEN=1 to write it"
    assert plan == json.loads(GOLDEN.read_text(encoding="utf-8")), (
        "plan changed; if that is intended, rerun with TRAINOPS_UPDATE_GOLDEN=1 and review "
        "the diff of tests/golden/plan-tiny-llm.json"
    )


def test_plan_json_from_another_cwd_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE.parent)
    result = run("plan", "-o", "json")
    assert result.code == 0
    plan = _normalized_plan(result.stdout)
    assert plan["pipeline"] == "tiny-llm"
    assert [s["name"] for s in plan["stages"]] == ["image", "train", "eval", "release", "rollout"]


# Terminal settings of the developer's shell that would change how rich prints.
PLAIN_TERMINAL: dict[str, str | None] = {
    "FORCE_COLOR": None,
    "TTY_COMPATIBLE": None,
    "TTY_INTERACTIVE": None,
    "COLUMNS": None,
}


def test_plan_table() -> None:
    result = run("plan", "-f", str(EXAMPLE), env=PLAIN_TERMINAL)
    assert (result.code, result.stderr) == (0, "")
    out = result.stdout
    assert "\x1b[" not in out, "no colour codes when stdout is not a terminal"
    lines = out.splitlines()
    assert lines[0].strip() == "tiny-llm"
    header = next(line for line in lines if "STAGE" in line)  # the one table style: headings in capitals
    for column in ("STAGE", "CONSUMES", "PRODUCES", "RUNS ON"):
        assert column in header
    first_column = [line.split("  ")[0] for line in lines[2:-3] if line and not line.startswith(" ")]
    stages = [name for name in first_column if name]
    assert stages == ["image", "train", "eval", "release", "rollout"]
    assert lines[-2:] == [
        "registry: file://.trainops/registry",
        "gitops:   file://.trainops/gitops.git (main:clusters/dev)",
    ]


def test_plan_with_env_dev() -> None:
    result = run("plan", "-f", str(EXAMPLE), "--env", "dev", "-o", "json")
    assert result.code == 0
    plan = json.loads(result.stdout)
    assert plan["env"] == "dev"
    train = next(s for s in plan["stages"] if s["name"] == "train")
    assert train["runsOn"] == "local subprocess, 1 node × 0 GPUs"
    assert train["details"]["scheduler"] == "local"
    assert (train["details"]["nodes"], train["details"]["gpusPerNode"]) == (1, 0)

    table = run("plan", "-f", str(EXAMPLE), "--env", "dev", env=PLAIN_TERMINAL)
    assert table.code == 0
    assert table.stdout.splitlines()[0].strip() == "tiny-llm (env dev)"


def test_plan_with_env_prod() -> None:
    plan = json.loads(run("plan", "-f", str(EXAMPLE), "--env", "prod", "-o", "json").stdout)
    assert plan["registry"] == "oci://harbor.example.com/llm"
    train = next(s for s in plan["stages"] if s["name"] == "train")
    assert train["runsOn"] == "Volcano Job queue pretrain, 64 nodes × 8 GPUs"


def test_plan_of_an_invalid_manifest_exits_3(tmp_path: Path) -> None:
    path = write(tmp_path / "trainops.yaml", INVALID)
    result = run("plan", "-f", str(path), "-o", "json")
    assert result.code == 3
    assert result.stdout == ""
    assert result.last_error_line == ("Error: 2 problems in the manifest; fix them and run `trainops validate` again")


# --- init -----------------------------------------------------------------------------------


def _tree(directory: Path) -> dict[str, bytes]:
    """The files under directory, less the git repository init makes (its commit ids differ)."""
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(directory).parts
    }


def test_init_into_an_empty_directory(tmp_path: Path) -> None:
    target = tmp_path / "My_Model"
    target.mkdir()
    result = run("init", str(target))
    assert (result.code, result.stderr) == (0, "")
    assert set(_tree(target)) == {
        "trainops.yaml",
        ".gitignore",
        ".github/workflows/trainops.yml",
        "my_model/__init__.py",
        "my_model/train.py",
        "my_model/eval.py",
        ".dockerignore",
    }
    head = subprocess.run(["git", "-C", str(target), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[:-1] == [
        f"wrote   {target / 'trainops.yaml'}",
        f"wrote   {target / '.github/workflows/trainops.yml'}",
        f"wrote   {target / 'my_model/__init__.py'}",
        f"wrote   {target / 'my_model/train.py'}",
        f"wrote   {target / 'my_model/eval.py'}",
        f"wrote   {target / '.dockerignore'}",
        f"wrote   {target / '.gitignore'}",
        f"git: a new repository, first commit {head.stdout[:12]}",
    ]
    assert result.stdout.splitlines()[-1].startswith(f"next (in {target}): trainops train run --local --env dev")
    tracked = subprocess.run(["git", "-C", str(target), "ls-files"], capture_output=True, text=True, check=True)
    assert set(tracked.stdout.split()) == set(_tree(target))  # the scaffold is the first commit, whole
    manifest = target / "trainops.yaml"
    assert oct(manifest.stat().st_mode & 0o777) != oct(0o600)  # not private: an editor's mode
    report = check_manifest(manifest)
    assert report.ok, report.problems
    assert report.environments == ["dev", "prod"]
    document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    assert document["metadata"]["name"] == "my-model"  # from the directory name
    assert document["spec"]["train"]["command"] == ["python3", "-m", "my_model.train"]
    assert document["environments"]["dev"]["train"]["scheduler"] == "local"
    ignored = (target / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".trainops/" in ignored
    assert "checkpoints/" in ignored
    workflow = yaml.safe_load((target / ".github/workflows/trainops.yml").read_text("utf-8"))
    steps = [s.get("run") for s in workflow["jobs"]["trainops"]["steps"]]
    assert 'pip install "$TRAINOPS_REQUIREMENT"' in steps  # from a source the user sets
    assert workflow["env"]["TRAINOPS_REQUIREMENT"] == f"trainops=={__version__}"
    assert document["spec"]["image"]["params"]["trainopsRequirement"] == f"trainops=={__version__}"
    assert "trainops validate --render" in steps
    assert run("validate", "-f", str(manifest)).code == 0


def test_init_creates_a_missing_directory_and_takes_a_name(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    config = write(tmp_path / "gitconfig", "[user]\n\tname = Ada\n\temail = ada@example.com\n")
    identity = {"GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"}
    result = run("init", str(target), "--name", "llama-ft", "-o", "json", env=identity)
    assert result.code == 0
    assert json.loads(result.stdout) == {
        "directory": str(target),
        "written": [
            "trainops.yaml",
            ".github/workflows/trainops.yml",
            "llama_ft/__init__.py",
            "llama_ft/train.py",
            "llama_ft/eval.py",
            ".dockerignore",
            ".gitignore",
        ],
        "updated": [],
        "kept": [],
        "gitCommit": subprocess.run(
            ["git", "-C", str(target), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip(),
        "gitAuthor": None,
        "ciNote": None,  # the workflow is in the project: a new repository's root
    }
    document = yaml.safe_load((target / "trainops.yaml").read_text(encoding="utf-8"))
    assert document["metadata"]["name"] == "llama-ft"
    assert _author(target) == "Ada <ada@example.com>"


def test_init_without_a_git_identity_commits_as_trainops_init_and_says_so(tmp_path: Path) -> None:
    target = tmp_path / "p"
    no_identity = {"GIT_CONFIG_GLOBAL": str(tmp_path / "none"), "GIT_CONFIG_NOSYSTEM": "1", "EMAIL": None}
    result = run("init", str(target), env=no_identity)
    assert result.code == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("git: "))
    assert line.endswith(" as trainops init <trainops-init@localhost> (set git config user.name/user.email for yours)")
    assert _author(target) == "trainops init <trainops-init@localhost>"


def _author(repository: Path) -> str:
    log = subprocess.run(
        ["git", "-C", str(repository), "log", "-1", "--format=%an <%ae>"], capture_output=True, text=True
    )
    return log.stdout.strip()


def test_init_inside_a_git_repository_makes_no_repository_and_no_commit(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    target = tmp_path / "sub"
    result = run("init", str(target), "-o", "json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["gitCommit"] is None
    assert not (target / ".git").exists()
    log = subprocess.run(["git", "-C", str(tmp_path), "log"], capture_output=True, text=True)
    assert log.returncode != 0  # still no commit: the user's repository is theirs to commit to


def test_init_in_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj42"
    project.mkdir()
    monkeypatch.chdir(project)
    assert run("init").code == 0
    assert yaml.safe_load(Path("trainops.yaml").read_text("utf-8"))["metadata"]["name"] == "proj42"


def test_init_twice_refuses_and_writes_nothing(tmp_path: Path) -> None:
    assert run("init", str(tmp_path)).code == 0
    (tmp_path / "trainops.yaml").write_text("# my edits\n", encoding="utf-8")
    (tmp_path / ".github/workflows/trainops.yml").unlink()
    before = _tree(tmp_path)
    result = run("init", str(tmp_path))
    assert result.code == 5
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"Error: refusing to overwrite trainops.yaml in {tmp_path}; pass --force to replace them"
    ]
    assert _tree(tmp_path) == before, "a refused init must write nothing (all or nothing)"


def test_init_refusal_names_every_existing_file(tmp_path: Path) -> None:
    assert run("init", str(tmp_path)).code == 0
    result = run("init", str(tmp_path))
    assert result.code == 5
    assert result.last_error_line == (
        f"Error: refusing to overwrite trainops.yaml, .github/workflows/trainops.yml in "
        f"{tmp_path}; pass --force to replace them"
    )


def test_init_force_replaces(tmp_path: Path) -> None:
    fresh, target = tmp_path / "fresh", tmp_path / "target"
    assert run("init", str(fresh), "--name", "demo").code == 0
    assert run("init", str(target), "--name", "demo").code == 0
    (target / "trainops.yaml").write_text("# my edits\n", encoding="utf-8")
    (target / ".github/workflows/trainops.yml").write_text("# mine\n", encoding="utf-8")
    result = run("init", str(target), "--name", "demo", "--force")
    assert result.code == 0
    assert _tree(target) == _tree(fresh)  # and no temporary file left behind


def test_init_appends_to_an_existing_gitignore(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "node_modules/\n.trainops/\n")
    result = run("init", str(tmp_path))
    assert result.code == 0
    assert f"updated {tmp_path / '.gitignore'}" in result.stdout.splitlines()
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == (
        "node_modules/\n.trainops/\n# trainops\ncheckpoints/\n"
    )
    # Once everything is there, a second init leaves the file alone.
    assert run("init", str(tmp_path), "--force").code == 0
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == (
        "node_modules/\n.trainops/\n# trainops\ncheckpoints/\n"
    )


def test_init_appends_after_a_gitignore_without_a_final_newline(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "*.log")
    assert run("init", str(tmp_path)).code == 0
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == ("*.log\n# trainops\n.trainops/\ncheckpoints/\n")


@pytest.mark.parametrize("name", ["Bad_Name", "-x", "x-", "a" * 64, "dots.not.allowed", "ünï"])
def test_init_bad_name_exits_3_and_writes_nothing(tmp_path: Path, name: str) -> None:
    target = tmp_path / "p"
    result = run("init", str(target), "--name", name)
    assert result.code == 3
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"Error: {name!r} is not a valid pipeline name; use lowercase letters, digits and '-' "
        "(a DNS-1123 label), e.g. --name my-model"
    ]
    assert not target.exists()


def test_init_into_a_file_is_a_usage_error(tmp_path: Path) -> None:
    target = write(tmp_path / "file", "x")
    result = run("init", str(target))
    assert result.code == 2
    assert result.last_error_line == (f"Error: Invalid value for '[DIRECTORY]': Directory '{target}' is a file.")
    assert target.read_text(encoding="utf-8") == "x"


# --- import weight --------------------------------------------------------------------------

HEAVY = ("pydantic", "pydantic_core", "rich", "boto3", "botocore", "docker", "git", "oras", "huggingface_hub")


def _heavy_loaded(code: str) -> list[str]:
    probe = (
        f"import json, sys\n{code}\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(heavy))))\n"
    )
    loaded = json.loads(python(probe))
    assert isinstance(loaded, list)
    return [str(m) for m in loaded]


def test_importing_the_cli_imports_nothing_heavy() -> None:
    assert _heavy_loaded("import trainops.cli.main") == []


@pytest.mark.parametrize(
    "module",
    [
        "trainops.manifest",
        "trainops.rollout",
        "trainops.render",
        "trainops.eval",
        "trainops.release",
        "trainops.render.image",
    ],
)
def test_importing_a_package_imports_nothing_heavy(module: str) -> None:
    """A package's `__init__` names its API lazily (trainops.lazy): importing the package, or
    a light module in it, loads no pydantic model."""
    assert _heavy_loaded(f"import {module}") == []


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import contextlib, io\n"
        "from trainops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
    )
    assert _heavy_loaded(code) == []


def _checkpoint_commands(tmp_path: Path, url: str, env: dict[str, str] | None = None) -> str:
    """Probe code: push two checkpoints (the second names the first), re-push the second
    unchanged (digest cache warm), then ckpt latest, ckpt ls and a lineage walk."""
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "model.safetensors").write_bytes(b"w" * 4096)
    (src / "config.json").write_text("{}")
    push = ["push", str(src), "--kind", "checkpoint"]
    commands = [
        [*push, f"{url}:step-100", "--step", "100", "--metric", "loss=2", "-o", "json"],
        [*push, f"{url}:step-200", "--step", "200", "--parent", f"{url}:step-100", "-o", "json"],
        [*push, f"{url}:step-200", "--step", "200", "--parent", f"{url}:step-100"],  # unchanged
        ["ckpt", "latest", url],
        ["ckpt", "ls", url],
        ["lineage", f"{url}:step-200"],
    ]
    return (
        "import contextlib, io, os\n"
        # COLUMNS: the lineage tree's references whole (the walk's check reads a node's line), not folded to 80
        f"os.environ.update({ {'TRAINOPS_CACHE_DIR': str(tmp_path / 'cache'), 'COLUMNS': '400', **(env or {})}!r})\n"
        "from trainops.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    codes = [main(args) for args in {commands!r}]\n"
        "assert codes == [0] * len(codes), codes\n"
        "lines = out.getvalue().splitlines()\n"
        f"assert any(line.startswith({url + ':step-200@sha256:'!r}) for line in lines), lines  # latest\n"
        "walk = zip(lines, lines[1:])  # a node's metrics are on the line below it\n"
        "assert any('parent: checkpoint' in a and 'step 100' in a and b.strip() == 'loss=2' for a, b in walk), lines\n"
    )


def test_push_repush_and_checkpoint_reads_import_nothing_heavy(tmp_path: Path) -> None:
    """The hot paths stay off pydantic (lineage is plain data there) and the rest: a
    re-push of unchanged content is a few stats and a manifest request."""
    assert _heavy_loaded(_checkpoint_commands(tmp_path, f"file://{tmp_path / 'reg'}/m/ckpt")) == []


def test_checkpoint_reads_on_a_registry_import_nothing_heavy(tmp_path: Path, registry: Any) -> None:
    """The same on oci://: the HTTP client is needed, pydantic is not."""
    url = f"oci://{registry.host}/heavy/ckpt"
    code = _checkpoint_commands(tmp_path, url, {"TRAINOPS_INSECURE_REGISTRIES": registry.host})
    assert _heavy_loaded(code) == []


def test_the_probe_sees_heavy_imports() -> None:
    """The probe is not blind: validating a manifest does import pydantic."""
    code = (
        "from pathlib import Path\nfrom trainops.manifest import check_manifest\n"
        f"check_manifest(Path({str(EXAMPLE)!r}))\n"
    )
    assert "pydantic" in _heavy_loaded(code)


def test_yaml_c_loader_is_not_required() -> None:
    """With PyYAML's C extension hidden, manifests still load (the pure-Python parser)."""
    code = (
        "import sys\n"
        "sys.modules['yaml._yaml'] = None\n"
        "import yaml\n"
        "assert not hasattr(yaml, 'CSafeLoader')\n"
        "from trainops.cli.main import main\n"
        f"code = main(['validate', '-f', {str(EXAMPLE)!r}])\n"
        f"code += main(['plan', '-f', {str(EXAMPLE)!r}, '-o', 'json'])\n"
        "assert 'yaml._yaml' not in sys.modules or sys.modules['yaml._yaml'] is None\n"
        "print('exit', code)\n"
    )
    out = python(code)
    assert out.splitlines()[-1] == "exit 0"


def test_train_run_works_right_after_init(tmp_path: Path) -> None:
    """The scaffold runs out of the box: its dev environment trains here, and every checkpoint
    the minimal trainer writes lands in the registry; a second run resumes from the newest."""
    from trainops_testing.cli import run_subprocess

    project = tmp_path / "fresh-model"
    assert run("init", str(project)).code == 0
    out = run_subprocess(["train", "run", "--local", "--env", "dev", "-o", "json"], cwd=project)
    assert out.code == 0, out.stderr
    result = json.loads(out.stdout)
    assert [p["step"] for p in result["pushed"]] == [10, 20, 30]
    listed = run_subprocess(["ckpt", "ls", "--env", "dev", "-o", "json"], cwd=project)
    assert [c["tag"] for c in json.loads(listed.stdout)] == ["step-10", "step-20", "step-30"]
    assert all(c["metrics"]["val_loss"] >= 0 for c in json.loads(listed.stdout))
    again = run_subprocess(
        ["train", "run", "--local", "--env", "dev", "-e", "TRAIN_STEPS=40", "-o", "json"], cwd=project
    )
    assert again.code == 0, again.stderr
    assert [p["step"] for p in json.loads(again.stdout)["pushed"]] == [40]
