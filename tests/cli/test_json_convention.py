"""One JSON convention: every command that reports data, run for real with `-o json` on a real
registry (Distribution, the project's spec.registry), prints camelCase keys and ISO 8601 UTC
times with `Z`. The flow is the example's own (examples/tiny-llm, environment dev): validate,
plan, train, checkpoints, eval, release, a rollout in the GitOps repo, the registry commands,
`trainops ci` and `trainops run`; the Slurm commands run on the one-node cluster.

A key that is not camelCase fails, except the keys of a map that holds data (metric names,
annotations, file paths, labels): those are named in DATA_MAPS, each with what it holds.
A data command this file does not run fails `test_every_data_command_is_run`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_conventions import LEAVES, NOT_DATA
from tests.signing.conftest import ec_key
from tests.slurm.conftest import slurm, slurm_cluster  # noqa: F401  (fixtures)
from trainops_testing.cli import Outcome, run, run_subprocess
from trainops_testing.services import bare_git_repo, git_env

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny-llm"
COPY_IGNORE = shutil.ignore_patterns(".trainops", "checkpoints", "__pycache__", "*.egg-info")
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")  # one precision: milliseconds
TIME_KEYS = {"created", "started", "ended", "submitted", "at", "lastPush", "refreshed", "date"}
PLACEHOLDER = "sha256:" + "0" * 64
SERVE_IMAGE = f"registry.example.com/tiny-llm/serve-vllm@{PLACEHOLDER}"
TRAIN_IMAGE = f"registry.example.com/tiny-llm/image@{PLACEHOLDER}"

# Maps whose keys are data, not field names (their values are still checked); metadata's
# values are maps of data too (safetensors header metadata, by file).
NESTED_DATA_MAPS = {"metadata"}
DATA_MAPS = {
    "annotations": "OCI annotations (org.opencontainers.…)",
    "labels": "OCI or Kubernetes labels",
    "metrics": "metric names as the trainer wrote them (val_loss)",
    "files": "rendered files by path",
    "counts": "object counts by API group and kind",
    "params": "image template parameters as the manifest names them",
    "details": "a stage's details by name",
    "dtypes": "parameters by safetensors dtype",
    "metadata": "safetensors header metadata by file",
    "unreadable": "why a safetensors header was refused, by file",
}

DATA_COMMANDS = {path for path, _ in LEAVES if path[-1] not in NOT_DATA}
SPAWNING = {("train", "run"), ("eval", "run"), ("run",), ("ci",)}  # their child needs real stdio: a process
SLURM_COMMANDS = {("train", "status"), ("train", "cancel")}  # run by test_the_slurm_commands

# Data commands whose success path needs a service no test can run here.
NOT_RUN = {
    ("hub", "export"): "a writable Hugging Face Hub (tests/hub runs olah, which refuses uploads)",
    ("incidents", "show"): "an incident, which only a supervised (Slurm) run that failed records",
    ("incidents", "report"): "a run's incidents: tests/faults/test_incidents_cli.py checks its JSON (bad_keys)",
    ("drill",): "a trainer running under `train run --slurm` to inject the fault into",
    ("train", "watch"): "the simulated Kubernetes cluster: tests/faults/test_kube_watch.py checks its JSON (bad_keys)",
    ("slo", "status"): "a Prometheus evaluating the SLO rules: tests/slo/test_alert_loop.py checks its JSON",
}


def bad_keys(doc: Any, where: str = "$") -> Iterator[str]:
    """Every key of `doc` that breaks the convention, and every time not in ISO 8601 UTC with Z."""
    if isinstance(doc, list):
        for n, item in enumerate(doc):
            yield from bad_keys(item, f"{where}[{n}]")
    elif isinstance(doc, dict):
        for key, value in doc.items():
            path = f"{where}.{key}"
            if not CAMEL.match(key):
                yield path
            if key in TIME_KEYS and isinstance(value, str) and value and not ISO_UTC.match(value):
                yield f"{path} = {value!r} (not ISO 8601 UTC with Z)"
            if key in DATA_MAPS and isinstance(value, dict):
                for name, item in value.items():
                    if key not in NESTED_DATA_MAPS:
                        yield from bad_keys(item, f"{path}[{name!r}]")
            else:
                yield from bad_keys(value, path)


def test_the_checker_fails_on_what_it_must() -> None:
    doc = {"bytes_freed": 1, "nodes": [{"gitCommit": "a", "git_commit": "b"}], "metrics": {"val_loss": 1.0}}
    assert list(bad_keys(doc)) == ["$.bytes_freed", "$.nodes[0].git_commit"]
    assert list(bad_keys({"created": "2026-12-04 13:18"})) == [
        "$.created = '2026-12-04 13:18' (not ISO 8601 UTC with Z)"
    ]
    assert list(bad_keys({"created": "2026-12-04T13:18:12.345Z", "at": "2026-12-04T13:18:12.000Z"})) == []
    assert list(bad_keys({"at": "2026-12-04T13:18:12Z"})) == ["$.at = '2026-12-04T13:18:12Z' (not ISO 8601 UTC with Z)"]
    assert list(bad_keys({"refreshed": 1764854292.5})) == []  # a number is caught below, in the browser's test


class Flow:
    """The example project on Distribution, and `trainops … -o json` run in it."""

    def __init__(self, root: Path, host: str) -> None:
        self.root = root
        self.host = host
        self.manifest = root / "trainops.yaml"
        self.outputs: dict[tuple[str, ...], list[Any]] = {}
        self.texts: dict[tuple[str, ...], list[str]] = {}

    def json(self, *args: str, env: str | None = "dev", manifest: bool = True) -> Any:
        """`trainops ARGS -o json` (with -f and --env of the project unless manifest=False): the
        document it printed (a list of them for `ckpt watch`, one a line), kept by command."""
        full = [*args, "-o", "json"]
        if manifest:
            full += ["-f", str(self.manifest)] + (["--env", env] if env else [])
        spawns = _command_of(args) in SPAWNING
        out = run_subprocess(full, cwd=self.root) if spawns else self.run(*full)
        assert out.code == 0, (args, out.code, out.stderr[-3000:])
        lines = [line for line in out.stdout.splitlines() if line.strip()]
        doc = [json.loads(line) for line in lines] if args[:2] == ("ckpt", "watch") else json.loads(out.stdout)
        self.outputs.setdefault(_command_of(args), []).append(doc)
        return doc

    def text(self, *args: str, env: str | None = "dev", manifest: bool = True) -> str:
        """`trainops ARGS` for people, piped (stdout is no terminal) with no $COLUMNS: what
        it printed, kept by command."""
        full = list(args)
        if manifest:
            full += ["-f", str(self.manifest)] + (["--env", env] if env else [])
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            out = run(*full, env={"COLUMNS": None})
        finally:
            os.chdir(cwd)
        assert out.code == 0, (args, out.code, out.stderr[-3000:])
        self.texts.setdefault(_command_of(args), []).append(out.stdout)
        return out.stdout

    def run(self, *args: str) -> Outcome:
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            return run(*args)
        finally:
            os.chdir(cwd)


_LEAF_PATHS = {path for path, _ in LEAVES}


def _command_of(args: tuple[str, ...]) -> tuple[str, ...]:
    """The command path of a command line: `registry ls …` → (registry, ls), `push …` → (push,)."""
    return tuple(args[:2]) if tuple(args[:2]) in _LEAF_PATHS else (args[0],)


def _project(tmp: Path, host: str) -> Path:
    root = tmp / "tiny-llm"
    shutil.copytree(
        EXAMPLE, root, ignore=shutil.ignore_patterns(".trainops", "checkpoints", "__pycache__", "*.egg-info")
    )
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    doc["spec"]["registry"] = f"oci://{host}/conv{uuid.uuid4().hex[:8]}"
    doc["spec"]["insecureRegistries"] = [host]
    doc["spec"]["gitops"]["repo"] = "file://.trainops/gitops.git"
    doc["spec"]["image"]["builder"] = "layer"
    doc["spec"]["image"]["base"] = f"{host}/conv-base/busybox:1"
    keys = root / "keys"
    keys.mkdir()
    ec_key(keys)  # releases are signed: `release verify` has something to verify
    doc["spec"]["release"]["signing"] = {"key": "keys/release.pem", "publicKey": "keys/release.pub"}
    dev = doc["environments"]["dev"]
    dev["train"]["env"] = {"TRAINOPS_MAX_STEPS": "200", "TRAINOPS_CKPT_EVERY": "100"}
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    environ = git_env()
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "tiny-llm"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=environ, capture_output=True)
    bare_git_repo(root / ".trainops" / "gitops.git")
    return root


def _base_image(host: str) -> None:
    """A one-layer base image in the registry, for the layer builder (`image build`)."""
    import gzip
    import io
    import tarfile

    from trainops.registry.backends.base import ManifestData, sha256_digest
    from trainops.registry.context import Registries
    from trainops.registry.store import bytes_source, upload_if_missing

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        data = b"base\n"
        info = tarfile.TarInfo("etc/base")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["PATH=/usr/bin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(raw.getvalue())]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256_digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": sha256_digest(layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    with Registries(insecure_registries=(host,)) as registries:
        ref = registries.ref(f"oci://{host}/conv-base/busybox:1")
        backend = registries.backend(ref)
        for blob in (layer, config):
            upload_if_missing(backend, ref.repository, bytes_source(blob), lambda _n: None)
        media = "application/vnd.oci.image.manifest.v1+json"
        backend.put_manifest(ref.repository, ManifestData(manifest, media, sha256_digest(manifest)), tag="1")


@pytest.fixture(scope="module")
def flow(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    """Every data command of the flow, run once; their JSON documents by command."""
    tmp = tmp_path_factory.mktemp("convention")
    saved = dict(os.environ)
    os.environ.update(git_env({}))
    os.environ["HOME"] = str(tmp / "home")
    os.environ["TRAINOPS_CACHE_DIR"] = str(tmp / "cache")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    for name in [n for n in os.environ if n.startswith(("TRAINOPS_", "TINY_LLM_", "GITHUB_", "CI_"))]:
        if name != "TRAINOPS_CACHE_DIR":
            del os.environ[name]
    try:
        project = Flow(_project(tmp, registry.host), registry.host)
        _base_image(registry.host)
        _run_the_flow(project, tmp)
        _walk_the_text(project)
        yield project
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _run_the_flow(f: Flow, tmp: Path) -> None:
    repo = f"oci://{f.host}/{yaml.safe_load(f.manifest.read_text())['spec']['registry'].rsplit('/', 1)[1]}"
    ckpts = f"{repo}/tiny-llm/checkpoints"
    f.json("validate", env=None)
    f.json("validate", "--render", env=None)
    f.json("plan")
    f.json("image", "render")
    f.json("image", "build", "--push", "--insecure")
    f.json("train", "render", "--image", TRAIN_IMAGE, "--run-id", "conv", env=None)
    f.json("train", "submit", "--image", TRAIN_IMAGE, "--run-id", "conv", env=None)
    f.json("train", "run", "--local", "--run-id", "conv-local")
    f.json("ckpt", "ls")
    f.json("ckpt", "latest")
    f.json("ckpt", "pull", "--latest", str(tmp / "restored"))
    f.json("eval", "render", "--image", TRAIN_IMAGE, "--run-id", "conv", env=None)
    f.json("eval", "submit", "--image", TRAIN_IMAGE, "--run-id", "conv-eval", env=None)
    f.json("eval", "run", "tiny-llm/checkpoints:step-200")
    f.json("eval", "ls")
    release = f.json("release", "create", "tiny-llm/checkpoints:step-200")
    f.json("release", "ls")
    f.json("release", "show", release["ref"])
    f.json("release", "verify", release["ref"])
    f.json("rollout", "render", release["ref"], "--image", SERVE_IMAGE)
    f.json("rollout", "start", release["ref"], "--image", SERVE_IMAGE)  # nothing served: stable at once
    forced = f.json("release", "create", "tiny-llm/checkpoints:step-100", "--version", "v0", "--force", "--reason", "x")
    f.json("rollout", "start", forced["ref"], "--image", SERVE_IMAGE)  # a canary
    while f.json("rollout", "status")["canary"] is not None:
        f.json("rollout", "promote")
    f.json("rollout", "history")
    f.json("rollout", "rollback")  # the first release, stable again
    f.json("rollout", "start", forced["ref"], "--image", SERVE_IMAGE)
    f.json("rollout", "abort")
    # the registry commands, on the registry itself
    step100, step200 = f"{ckpts}:step-100", f"{ckpts}:step-200"
    f.json("registry", "ls")  # the repositories of spec.registry
    f.json("registry", "ls", "-l", ckpts, "--all", "--insecure", manifest=False)
    f.json("registry", "show", step200, "--insecure", manifest=False)
    f.json("registry", "diff", step100, step200, "--insecure", manifest=False)
    f.json("registry", "tag", step200, f"{ckpts}:conv-tag", "--insecure", manifest=False)
    copied = f.json("registry", "copy", step200, f"{repo}/copied:one", "--insecure", manifest=False)
    f.json("registry", "rm", f"{repo}/copied@{copied['digest']}", "--insecure", manifest=False)
    f.json("registry", "gc", repo, "--dry-run", "--insecure", manifest=False)
    f.json("pull", step200, str(tmp / "pulled"), "--insecure", manifest=False)
    f.json("push", str(tmp / "pulled"), f"{repo}/pushed:one", "--kind", "checkpoint", "--insecure", manifest=False)
    f.json("lineage", release["ref"], "--both")
    f.json("lineage", "git:HEAD")
    watched = tmp / "watched" / "step-7"
    watched.mkdir(parents=True)
    (watched / "w.bin").write_bytes(b"w" * 64)
    (watched / ".complete").write_text("")
    f.json("ckpt", "watch", str(tmp / "watched"), "--once", "--run-id", "conv-watch", "--repository", f"{repo}/watched")
    f.json("ckpt", "prune", "--keep-last", "1", "--dry-run")
    f.json(
        "hub",
        "import",
        "tiny/model",
        f"{repo}/hub:one",
        "--from-dir",
        str(tmp / "pulled"),
        "--insecure",
        manifest=False,
    )
    f.json("init", str(tmp / "fresh"), "--ci", "none", manifest=False)
    f.json("incidents", "ls")
    f.json("incidents", "classes")
    f.json("incidents", "classes", "nvlink")
    f.json("incidents", "dcgm-counters", manifest=False)
    f.json("run", "--dry-run", "--serve-image", SERVE_IMAGE)
    f.json("ci", "--since", "HEAD", "--serve-image", SERVE_IMAGE)


def _walk_the_text(f: Flow) -> None:
    """The commands that print what is there (a table, a record, a tree) for people, piped;
    those that act (push, gc, prune, validate) say what they did in a sentence or two."""
    repo = f"oci://{f.host}/{yaml.safe_load(f.manifest.read_text())['spec']['registry'].rsplit('/', 1)[1]}"
    ckpts = f"{repo}/tiny-llm/checkpoints"
    release = f.outputs[("release", "create")][0]["ref"]
    step100, step200 = f"{ckpts}:step-100", f"{ckpts}:step-200"
    f.text("plan")
    f.text("ckpt", "ls")
    f.text("ckpt", "latest")
    f.text("eval", "ls")
    f.text("release", "ls")
    f.text("release", "show", release)
    f.text("release", "verify", release)
    f.text("rollout", "status")
    f.text("rollout", "history")
    f.text("registry", "ls")
    f.text("registry", "ls", ckpts, "--insecure", manifest=False)
    f.text("registry", "ls", "-l", ckpts, "--all", "--insecure", manifest=False)
    f.text("registry", "show", step200, "--insecure", manifest=False)
    f.text("registry", "show", release, "--insecure", manifest=False)
    f.text("registry", "diff", step100, step200, "--insecure", manifest=False)
    f.text("lineage", release, "--both")
    f.text("lineage", "git:HEAD")
    f.text("incidents", "ls")
    f.text("incidents", "classes")
    f.text("run", "--dry-run", "--serve-image", SERVE_IMAGE)


# Data commands whose text is not walked at 80 columns: what they print instead of a listing.
NOT_WALKED = {
    ("image", "render"): "a Dockerfile, verbatim",
    ("train", "render"): "the rendered manifests, verbatim YAML",
    ("eval", "render"): "the rendered manifests, verbatim YAML",
    ("rollout", "render"): "the rendered manifests, verbatim YAML",
    ("schema",): "the JSON Schema",
}


def test_every_data_command_is_run(flow: Flow) -> None:
    missing = DATA_COMMANDS - set(flow.outputs) - SLURM_COMMANDS - set(NOT_RUN)
    assert not missing, f"data commands this test does not run: {sorted(missing)}"


@pytest.mark.parametrize("command", sorted(DATA_COMMANDS - SLURM_COMMANDS - set(NOT_RUN)), ids=" ".join)
def test_json_keys_are_camel_case_and_times_iso(flow: Flow, command: tuple[str, ...]) -> None:
    docs = flow.outputs.get(command)
    assert docs, f"trainops {' '.join(command)} did not run"
    for doc in docs:
        bad = list(bad_keys(doc))
        assert not bad, f"trainops {' '.join(command)} -o json: {bad}"


def test_every_listing_command_is_walked_in_text(flow: Flow) -> None:
    """Each command that reports what is there without changing it (ls, show, status, …) is
    walked in its text form; commands that act report what they did, a line each."""
    acting = {c for c in flow.outputs if c not in flow.texts}
    listing = {c for c in DATA_COMMANDS if c[-1] in {"ls", "show", "status", "history", "diff", "classes", "latest"}}
    listing |= {("plan",), ("lineage",)}
    missing = listing - set(flow.texts) - SLURM_COMMANDS - set(NOT_RUN) - set(NOT_WALKED)
    assert not missing, f"listing commands not walked in text: {sorted(missing)} (acting: {sorted(acting)})"


@pytest.mark.parametrize("command", sorted(DATA_COMMANDS - SLURM_COMMANDS - set(NOT_RUN)), ids=" ".join)
def test_text_fits_80_columns_piped(flow: Flow, command: tuple[str, ...]) -> None:
    """Piped with no $COLUMNS, every line fits 80 columns; a longer line is one word (a
    reference or URL on a line of its own, never cut) or the output says how to widen."""
    for text in flow.texts.get(command, []):
        wide = [line for line in text.splitlines() if len(line) > 80 and " " in line.strip()]
        assert not wide or "--wide" in text, f"trainops {' '.join(command)}: {len(wide)} lines > 80:\n" + "\n".join(
            wide[:5]
        )


# Commands walked in text that take no --wide, and why none is promised: nothing of theirs
# is shortened or folded that a flag would show (-o json has every reference whole).
WITHOUT_WIDE = {
    ("ckpt", "latest"): "one pinned reference, whole",
    ("registry", "diff"): "file paths and counts",
    ("lineage",): "a tree, not a table: its references fold between their parts",
    ("incidents", "ls"): "short cells (ids, times, classes, nodes), none shortened",
    ("run",): "a flow's report: digests shortened to 12 hex digits, as in every report of an action",
}


def test_every_table_takes_wide_or_promises_nothing(flow: Flow) -> None:
    """A listing or record command takes --wide (and with it folds nothing), or is in WITHOUT_WIDE."""
    from trainops.cli.main import cli

    for command in flow.texts:
        node = cli
        for part in command:
            node = node.commands[part]  # type: ignore[attr-defined]
        takes = any("--wide" in getattr(p, "opts", ()) for p in node.params)
        assert takes != (command in WITHOUT_WIDE), f"trainops {' '.join(command)}: --wide {takes}"
    for args in (("rollout", "status"), ("eval", "ls"), ("release", "ls")):
        wide = flow.text(*args, "--wide")
        assert any(len(line) > 80 for line in wide.splitlines()), wide  # on one line each
        assert wide.count("sha256:") == len(re.findall(r"sha256:[0-9a-f]{64}", wide)), wide  # digests whole


def test_the_slurm_commands(slurm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """`train submit` through Slurm, then `train status` and `train cancel` of its run."""
    root = tmp_path / "tiny-llm"
    shutil.copytree(
        EXAMPLE, root, ignore=shutil.ignore_patterns(".trainops", "checkpoints", "__pycache__", "*.egg-info")
    )
    monkeypatch.setenv("TRAINOPS_VENV", sys.prefix)
    manifest = str(root / "trainops.yaml")
    submitted = run("train", "submit", "-f", manifest, "--env", "slurm-local", "-o", "json")
    assert submitted.code == 0, submitted.stderr
    run_id = json.loads(submitted.stdout)["runId"]
    for args in (("train", "status", run_id), ("train", "status"), ("train", "cancel", run_id)):
        out = run(*args, "-f", manifest, "--env", "slurm-local", "-o", "json")
        assert out.code == 0, (args, out.stderr)
        assert not list(bad_keys(json.loads(out.stdout))), (args, out.stdout)


def test_the_browser_api_sends_times_as_iso(flow: Flow) -> None:
    """/api/repositories: `refreshed` and `lastPush` are ISO 8601 UTC with Z, not epoch numbers."""
    from starlette.testclient import TestClient

    from trainops.registry.context import Registries
    from trainops.ui.app import create_app
    from trainops.ui.server import prepare

    registry = yaml.safe_load(flow.manifest.read_text())["spec"]["registry"]
    with Registries(default_registry=registry, insecure_registries=(flow.host,)) as registries:
        prepared = prepare(
            registries=registries, urls=[registry], host="127.0.0.1", token=None, index_path=flow.root / "ui.sqlite"
        )
        with TestClient(create_app(prepared.browser), base_url="http://127.0.0.1") as client:
            body = client.get("/api/repositories").json()
    repos = body["repositories"]
    assert repos and not list(bad_keys(body)), body
    assert all(isinstance(r["refreshed"], str) and ISO_UTC.match(r["refreshed"]) for r in repos), repos


def test_every_exemption_is_used(flow: Flow) -> None:
    """No stale name in DATA_MAPS: each is a key some command prints."""
    printed = {k for docs in flow.outputs.values() for d in docs for k in _all_keys(d)}
    assert set(DATA_MAPS) - printed == set()


def _all_keys(doc: Any) -> Iterator[str]:
    if isinstance(doc, list):
        for item in doc:
            yield from _all_keys(item)
    elif isinstance(doc, dict):
        for key, value in doc.items():
            yield key
            yield from _all_keys(value)
