"""The CLI's conventions, checked across click's whole command tree: every command's --help
works, every command that reports data takes -o json, exit codes come only from the reference's
table (docs/reference/exit-codes.md) (and the same mistake gets the same code), -v works after a command, tables fit 80
columns, tags sort naturally, `registry show` is for people, shell completion works."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from trainops import errors
from trainops.cli.main import cli
from trainops_testing.cli import REPO, run, run_subprocess

# Commands that print something other than a data report: the schema is JSON already, the
# completion script is a shell script, `train logs` prints a job's output file verbatim and
# `ui` serves web pages (its JSON is the /api it serves), `alerts serve` receives Alertmanager's
# webhook (a server) and `slo rules` prints a Prometheus rule file (YAML, read by Prometheus).
NOT_DATA = {"schema", "completion", "logs", "ui", "serve", "rules"}


def _walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _walk(sub, (*path, name))


LEAVES = [(path, cmd) for path, cmd in _walk(cli) if path and not isinstance(cmd, click.Group)]
IDS = [" ".join(path) for path, _ in LEAVES]


def readme_exit_codes() -> dict[int, str]:
    """The exit codes as the reference lists them (docs/reference/exit-codes.md)."""
    text = (REPO / "docs" / "reference" / "exit-codes.md").read_text()
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| (.+?) \|$", text, re.MULTILINE)}


def test_one_exit_code_table() -> None:
    """The reference's table is the only list of codes; every error class maps into it."""
    table = readme_exit_codes()
    assert set(table) == {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 130}
    classes = [errors.TrainopsError, *_subclasses(errors.TrainopsError)]
    assert {c.exit_code for c in classes} <= set(table)
    doc = errors.__doc__ or ""
    for code in table:
        assert re.search(rf"^\s+{code}\s", doc, re.MULTILINE), f"exit code {code} is not in errors.py's docstring"


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=IDS)
def test_help_works_and_data_commands_take_output_json(path: tuple[str, ...], command: click.Command) -> None:
    helped = run(*path, "--help")
    assert helped.code == 0 and "Usage: trainops" in helped.stdout, helped.stderr
    assert "-v, --verbose" in helped.stdout, "-v must work after every command"
    if path[-1] in NOT_DATA:
        return
    output = [p for p in command.params if isinstance(p, click.Option) and "--output" in p.opts]
    assert output, f"trainops {' '.join(path)} reports data but has no -o/--output"
    assert "-o" in output[0].opts
    assert isinstance(output[0].type, click.Choice) and list(output[0].type.choices) == ["text", "json"]


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=IDS)
def test_exit_codes_come_from_the_table(
    path: tuple[str, ...], command: click.Command, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every command, run bare in an empty directory: a documented code and one `Error:` line."""
    monkeypatch.chdir(tmp_path)
    out = run(*path, env={"TRAINOPS_RETRY_BUDGET": "0", "TRAINOPS_CKPT_REPOSITORY": None})
    assert out.code in readme_exit_codes(), (out.code, out.stderr)
    assert "Traceback" not in out.stderr
    if out.code:
        assert "Error:" in out.stderr, out.stderr
        assert out.code != 1, f"a bug: {out.stderr}"


def test_the_same_mistake_gets_the_same_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No trainops.yaml here or above (and nothing else to go by): exit 4 from every command,
    with the same words, whether it needs the manifest itself or the registry it names."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINOPS_CEILING_DIRECTORIES", str(tmp_path.parent))
    env = {"TRAINOPS_CKPT_REPOSITORY": None}
    missing = f"no trainops.yaml in {tmp_path} or any parent directory"
    commands = [
        ("registry", "ls"),
        ("registry", "gc"),
        ("registry", "ls", "--env", "prod"),
        ("ckpt", "ls"),
        ("ckpt", "latest"),
        ("ckpt", "prune"),
        ("ui",),
        ("plan",),
        ("validate",),
        ("train", "run", "--local"),
        ("rollout", "status"),
        ("release", "create"),
        ("eval", "ls"),
    ]
    for args in commands:
        out = run(*args, env=env)
        assert out.code == 4 and missing in out.last_error_line, (args, out.stderr)
    assert run("registry", "show", "team/model:v1").code == 2  # a short reference with no registry to complete it


def test_commands_find_the_manifest_in_parent_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As git finds .git: from a subdirectory, the project's trainops.yaml (and its relative paths)."""
    (tmp_path / "trainops.yaml").write_text(
        "apiVersion: trainops.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: found}\n"
        "spec:\n  registry: file://.trainops/registry\n"
    )
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    planned = run("plan", "-o", "json")
    assert planned.code == 0, planned.stderr
    assert json.loads(planned.stdout)["manifest"] == str(tmp_path / "trainops.yaml")
    (deep / "w.txt").write_text("w")
    assert run("push", "w.txt", "found/files:v1").code == 0
    assert (tmp_path / ".trainops" / "registry" / "found" / "files" / "index.json").is_file()  # the manifest's registry
    assert run("registry", "ls", "-o", "json").stdout.count("found/files") == 1
    monkeypatch.setenv("TRAINOPS_CEILING_DIRECTORIES", str(tmp_path / "src"))  # a ceiling stops the search
    assert run("plan").code == 4


def test_lineage_of_a_git_revision_outside_a_repository_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    out = run("lineage", "git:HEAD", "--registry", f"file://{tmp_path}/reg")
    assert out.code == 4
    assert out.last_error_line.startswith(f"Error: git:HEAD: {tmp_path} is not in a git repository"), out.stderr


def test_hints_name_only_options_that_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (("ckpt", "ls"), ("ckpt", "prune"), ("ckpt", "watch", "d", "--run-id", "r")):
        out = run(*args, env={"TRAINOPS_CKPT_REPOSITORY": None})
        named = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", out.last_error_line))
        command = cli
        for part in args[:2]:
            command = command.commands[part]  # type: ignore[attr-defined]
        known = {opt for p in command.params for opt in getattr(p, "opts", ())}
        assert named <= known, (args, named - known, out.last_error_line)


def test_a_failed_trainer_exits_9_with_its_status(tmp_path: Path) -> None:
    """A trainer exiting 3 must not read as "invalid manifest" (3)."""
    (tmp_path / "trainops.yaml").write_text(
        "apiVersion: trainops.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: failing}\n"
        "spec:\n  train:\n    scheduler: local\n    command: [python3, -c, 'raise SystemExit(3)']\n"
        "    checkpoint: {resume: none}\n"
    )
    out = run_subprocess(["train", "run", "--local", "-f", str(tmp_path / "trainops.yaml")], cwd=tmp_path)
    assert out.code == 9, out.stderr
    assert out.last_error_line.startswith("Error: train.command exited 3"), out.stderr


# -- registries: messages, retries, tags ------------------------------------------------------


def _push(tmp_path: Path, ref: str, content: str, *extra: str) -> tuple[int, str, str]:
    src = tmp_path / f"src-{content}"
    src.mkdir(exist_ok=True)
    file = src / "a.txt"
    if not file.exists():  # the same directory pushed again keeps its mtime, as a user's would
        file.write_text(content)
    out = run("push", str(src), ref, *extra)
    return out.code, out.stdout.strip(), out.stderr


def test_a_missing_oci_tag_says_which_tag_of_which_repository(registry: object, tmp_path: Path) -> None:
    host = registry.host  # type: ignore[attr-defined]
    code, _, err = _push(tmp_path, f"oci://{host}/conv/missing:v1", "x", "--insecure")
    assert code == 0, err
    out = run("pull", f"oci://{host}/conv/missing:nosuch", str(tmp_path / "dest"), "--insecure")
    assert out.code == 4
    assert f"no tag 'nosuch' in oci://{host}/conv/missing" in out.last_error_line
    assert f"`trainops registry ls oci://{host}/conv/missing` lists its tags" in out.last_error_line
    gone = run("pull", f"oci://{host}/conv/nosuchrepo:v1", str(tmp_path / "dest"), "--insecure")
    assert gone.code == 4 and f"oci://{host}/conv/nosuchrepo" in gone.last_error_line, gone.stderr


def test_retries_are_visible_and_retry_after_is_honoured(registry: object, tmp_path: Path) -> None:
    from tests.registry.proxy import FaultProxy

    with FaultProxy(registry.host) as proxy:  # type: ignore[attr-defined]
        ref = f"oci://{proxy.host}/conv/retry:v1"
        code, _, err = _push(tmp_path, ref, "retry", "--insecure")
        assert code == 0, err
        proxy.fail_status, proxy.retry_after, proxy.fail_next = 429, "1", 2
        out = run_subprocess(["pull", ref, str(tmp_path / "dest"), "--insecure"], cwd=tmp_path)
        assert out.code == 0, out.stderr
        retries = [line for line in out.stderr.splitlines() if "retry" in line]
        assert len(retries) == 2, out.stderr
        assert retries[0].startswith("WARNING: GET http://") and "429 Too Many Requests" in retries[0]
        assert "retry 1 of 5 in 1.0 s (Retry-After)" in retries[0] and "retry 2 of 5" in retries[1]


def test_an_unreachable_registry_fails_with_a_line_per_retry(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = run_subprocess(
        ["pull", f"oci://127.0.0.1:{port}/x/y:v1", str(tmp_path / "d"), "--insecure"],
        env={"TRAINOPS_RETRY_BUDGET": "0.5"},
        cwd=tmp_path,
    )
    assert out.code == 6, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("WARNING:")]
    assert warnings and all("connection refused" in w and " in " in w for w in warnings), out.stderr
    assert out.last_error_line.startswith(f"Error: cannot reach registry 127.0.0.1:{port}")


def test_moving_a_tag_says_so_and_no_move_refuses(tmp_path: Path) -> None:
    ref = f"file://{tmp_path}/reg/conv:v1"
    code, first, err = _push(tmp_path, ref, "one")
    assert code == 0, err
    code, second, err = _push(tmp_path, ref, "two")
    assert code == 0 and f"moved tag v1: {first} → {second}" in err
    code, same, err = _push(tmp_path, ref, "two")
    assert code == 0 and same == second and "moved tag" not in err
    code, _, err = _push(tmp_path, ref, "three", "--no-move")
    assert code == 5 and "refusing to move it" in err
    shown = json.loads(run("registry", "show", ref, "-o", "json").stdout)
    assert shown["digest"] == second  # nothing was written
    refused = run("registry", "tag", f"file://{tmp_path}/reg/conv@{first}", ref, "--no-move")
    assert refused.code == 5
    moved = run("registry", "tag", f"file://{tmp_path}/reg/conv@{first}", ref, "-o", "json")
    assert json.loads(moved.stdout)["movedFrom"] == second


def test_a_bad_repository_name_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    code, _, err = _push(tmp_path, f"file://{tmp_path}/reg/My Repo:v1", "x")
    assert code == 3 and "OCI Distribution rule" in err
    assert not (tmp_path / "reg").exists()


# -- output ------------------------------------------------------------------------------------


def test_tables_fit_80_columns_and_sort_tags_naturally(tmp_path: Path) -> None:
    repo = f"file://{tmp_path}/a-registry-with-a-rather-long-path-name/team/tiny-llm/checkpoints"
    for step in (1000, 600, 20):
        src = tmp_path / f"step-{step}"
        src.mkdir()
        (src / "w.bin").write_bytes(os.urandom(10))
        metrics = ("--metric", "val_loss=1.2345678", "--metric", "train_loss=2.3456789", "--metric", "lr=0.0003")
        assert (
            run("push", str(src), f"{repo}:step-{step}", "--kind", "checkpoint", "--step", str(step), *metrics).code
            == 0
        )
    env = {"COLUMNS": "80"}
    names = run("registry", "ls", repo, env=env)  # the tag names alone, one a line
    assert names.stdout.split() == ["step-20", "step-600", "step-1000"]
    listed = run("registry", "ls", "-l", repo, env=env)
    assert listed.code == 0
    assert [line.split()[0] for line in listed.stdout.splitlines() if line.strip().startswith("step-")] == [
        "step-20",
        "step-600",
        "step-1000",
    ]
    ckpts = run("ckpt", "ls", repo, env=env)
    for out in (listed, ckpts):
        assert out.code == 0, out.stderr
        heading, *rows = out.stdout.splitlines()
        assert heading == repo  # the repository on a line of its own, never broken mid-word
        assert all(len(line) <= 80 for line in rows), out.stdout
        assert "…" not in out.stdout
    assert "val_loss=1.23457" in ckpts.stdout and "train_loss=2.34568" in ckpts.stdout
    wide = run("ckpt", "ls", repo, "--wide", env=env)
    assert any(len(line) > 80 for line in wide.stdout.splitlines())  # every column, each on one line


def test_registry_show_is_for_people(tmp_path: Path) -> None:
    repo = f"file://{tmp_path}/reg/show"
    code, parent, err = _push(tmp_path, f"{repo}:base", "base")
    assert code == 0, err
    src = tmp_path / "child"
    src.mkdir()
    (src / "w.bin").write_text("w")
    args = ("--parent", f"{repo}:base", "--metric", "val_loss=1.5", "--step", "7", "--annotation", "team=llm")
    assert run("push", str(src), f"{repo}:child", "--kind", "checkpoint", *args).code == 0
    out = run("registry", "show", f"{repo}:child", env={"COLUMNS": "200"})  # a wide screen: nothing folds
    assert out.code == 0
    text = out.stdout
    assert "{" not in text and "[" not in text, text  # no Python reprs
    assert "parent: parent" not in text and f"  parent:   {repo}:base@{parent[:19]}" in text
    assert "  metrics:  val_loss=1.5" in text and "  step:     7" in text and "    team = llm" in text
    fields = [line for line in text.splitlines()[1:] if re.match(r"^  [a-z ]+:\s", line)]
    assert len({line.index(line.split(":", 1)[1].lstrip()) for line in fields}) == 1  # aligned values


def test_lineage_takes_output_json(tmp_path: Path) -> None:
    code, digest, err = _push(tmp_path, f"file://{tmp_path}/reg/lin:v1", "x")
    assert code == 0, err
    out = run("lineage", f"file://{tmp_path}/reg/lin:v1", "-o", "json")
    assert out.code == 0 and digest in out.stdout
    json.loads(out.stdout)


def test_verbose_after_the_command(tmp_path: Path) -> None:
    import logging

    levels = []
    for extra in ((), ("-v",), ("-vv",)):
        code, _, err = _push(tmp_path, f"file://{tmp_path}/reg/v:v1", "x", *extra)
        assert code == 0, err
        levels.append(logging.getLogger().level)
    assert levels == [logging.WARNING, logging.INFO, logging.DEBUG]
    assert run("-vv", "registry", "ls", f"file://{tmp_path}/reg/v").code == 0
    assert logging.getLogger().level == logging.DEBUG


def test_progress_bars_count_in_binary_units() -> None:
    from rich.progress import Progress

    from trainops.cli.progress import binary_transfer_column

    column = binary_transfer_column()
    with Progress(column, disable=True) as progress:
        task = progress.add_task("x", total=200 * 1024 * 1024, completed=100 * 1024 * 1024)
        text = column.render(progress.tasks[task]).plain
    assert text.startswith("100.0 MiB/200.0 MiB") and "MB" not in text.replace("MiB", "")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion(shell: str) -> None:
    script = run("completion", shell)
    assert script.code == 0 and "_TRAINOPS_COMPLETE" in script.stdout
    env = {"_TRAINOPS_COMPLETE": "bash_complete", "COMP_WORDS": "trainops regi", "COMP_CWORD": "1"}
    out = run_subprocess([], env=env)
    assert out.code == 0 and "registry" in out.stdout


def test_every_option_a_hint_names_exists() -> None:
    """Hints in the library name trainops options that exist (or another tool's, in backticks)."""
    other_tools = {"--force-reinstall", "--branch", "--bare"}  # pip's and git's, quoted as commands
    other_tools |= {"--export-pubkey", "--read-object", "--type"}  # p11tool's and pkcs11-tool's
    options: set[str] = set()
    for _, command in _walk(cli):
        options.update(opt for p in command.params for opt in getattr(p, "opts", ()))
    named: set[str] = set()
    for path in (REPO / "trainops").rglob("*.py"):
        for hint in re.findall(r'hint=(f?"[^"]*"(?:\s*f?"[^"]*")*)', path.read_text()):
            named.update(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", hint))
    assert named, "the scan found no hint naming an option"
    assert named - other_tools <= options, sorted(named - other_tools - options)
