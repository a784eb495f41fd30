"""The shape of the package, checked: imports point one way (DESIGN.md's layers), no two
modules import each other (counting the imports inside functions, which are still
dependencies), no function is longer than 80 lines, no module longer than 600.

Layers, lowest first; a package may import its own layer and the ones below, never above:

    0  the foundation: errors, manifest, clock, serialize, units, retry, podenv, projectdir,
       gitinfo, templating, supervise, scaffold, interrupt, modelfiles, lazy, runid (everything may use them)
    1  registry (its backends are inside it)
    2  the rooms that work with artifacts and the cluster: image, render, gitops,
       checkpoint, eval, release, rollout, slurm, cluster, faults, signing
    3  train: one training room, every target (local, Slurm, Kubernetes) behind one interface
    4  pipeline, and what sits beside it reading through the registry: ui, hub; completion
    5  cli

Inside one layer, packages may import each other as long as no two do both ways.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "trainops"

LAYERS: dict[str, int] = {
    **dict.fromkeys(
        (
            "__init__",
            "errors",
            "manifest",
            "clock",
            "serialize",
            "units",
            "retry",
            "podenv",
            "projectdir",
            "gitinfo",
            "templating",
            "supervise",
            "scaffold",
            "interrupt",
            "modelfiles",
            "lazy",
            "runid",
        ),
        0,
    ),
    "registry": 1,
    **dict.fromkeys(
        (
            "image",
            "render",
            "gitops",
            "checkpoint",
            "eval",
            "release",
            "rollout",
            "slurm",
            "cluster",
            "faults",
            "signing",
            "slo",
        ),
        2,
    ),
    "train": 3,
    **dict.fromkeys(("pipeline", "ui", "hub", "completion"), 4),
    "cli": 5,
}
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The trainops modules `path` imports, anywhere in it (TYPE_CHECKING blocks included:
    a type-only import is a dependency too, and a circle through one is still a circle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("trainops"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("trainops"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else str(node.module))
    return {name for name in found if name in MODULES}


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other() -> None:
    assert _cycles(GRAPH) == []


def test_no_two_packages_import_each_other() -> None:
    packages: dict[str, set[str]] = {}
    for module, deps in GRAPH.items():
        packages.setdefault(_package(module), set()).update(
            _package(d) for d in deps if _package(d) != _package(module)
        )
    assert _cycles(packages) == []


def test_every_package_has_a_layer() -> None:
    assert {_package(m) for m in MODULES} - set(LAYERS) == set()


def test_imports_point_down() -> None:
    upward = sorted(
        f"{module} imports {dep}"
        for module, deps in GRAPH.items()
        for dep in deps
        if LAYERS.get(_package(dep), 0) > LAYERS.get(_package(module), 0)
    )
    assert upward == []


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_over_80_lines() -> None:
    long = []
    for name, path in MODULES.items():
        for func in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            start = min([func.lineno, *(d.lineno for d in func.decorator_list)])
            length = (func.end_lineno or func.lineno) - start + 1
            if length > MAX_FUNCTION_LINES:
                long.append(f"{name}.{func.name}: {length} lines")
    assert long == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_600_lines(name: str) -> None:
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines"


def _reexports(tree: ast.Module) -> list[str]:
    """Names a module imports from another trainops module only to hand them on: a star
    import, or an import whose names the module never uses (the shim of a move)."""
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {
        node.value.id for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }
    exported = {
        element.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for element in ast.walk(node.value)
        if isinstance(element, ast.Constant)
    }  # a module's declared API
    found = []
    for node in tree.body:  # module level: an import inside a function is used there
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trainops"):
            for alias in node.names:
                if alias.name == "*" or (alias.asname or alias.name) not in used | exported:
                    found.append(f"{node.module}.{alias.name}")
    return found


def test_no_module_only_reexports() -> None:
    """A moved name has one home: callers import it there, no shim keeps the old path."""
    modules = {name: path for name, path in MODULES.items() if path.name != "__init__.py"}  # a package's API
    shims = {name: _reexports(ast.parse(path.read_text(encoding="utf-8"))) for name, path in modules.items()}
    assert {name: names for name, names in shims.items() if names} == {}


def test_the_reexport_finder_finds_a_shim() -> None:
    shim = ast.parse("from trainops.modelfiles.safetensors import *\nfrom trainops.cli.options import wide_option\n")
    assert _reexports(shim) == ["trainops.modelfiles.safetensors.*", "trainops.cli.options.wide_option"]


def test_a_type_only_import_counts(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trainops.ui.views import Browser\n"
    )
    assert _imports(module) == {"trainops.ui.views"}


def _offenders(finder: Callable[[ast.AST], list[int]], allowed: set[str]) -> dict[str, list[int]]:
    """The modules (other than `allowed`) where `finder` finds lines, with those lines."""
    found = {name: finder(ast.parse(path.read_text(encoding="utf-8"))) for name, path in MODULES.items()}
    return {name: lines for name, lines in found.items() if lines and name not in allowed}


# The homes of references: the registry's parser (`Reference`) and the pinned-image parser
# (`PinnedImage`). Everything else asks them for a digest, tag or name instead of cutting text
# at its "@". The other "@"s in the package are not references and say what they cut.
REFERENCE_HOMES = {"trainops.registry.reference", "trainops.render.image"}
NOT_REFERENCES = {
    "trainops.gitinfo": "user@ in a git remote URL",
    "trainops.registry.backends.oci.http": "user@ in a registry URL's netloc",
    "trainops.hub.hfapi": "a Hub repo_id@revision",
}
_CUTS = {"split", "rsplit", "partition", "rpartition", "index", "rindex", "find", "rfind"}


def _cuts_at(tree: ast.AST) -> list[int]:
    """The lines that cut a string at "@" by hand (`text.rsplit("@", 1)` and its kin)."""
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _CUTS
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "@"
    )


def test_references_are_not_split_by_hand() -> None:
    """Pinned references travel as `Reference` / `PinnedImage`, not strings re-split at "@"."""
    assert _offenders(_cuts_at, REFERENCE_HOMES | set(NOT_REFERENCES)) == {}


def test_the_reference_cut_finder_finds_cuts() -> None:
    tree = ast.parse('a = ref.rsplit("@", 1)[1]\nb, _, c = ref.partition("@")\nd = ref.split(":")\ne = "@" in ref\n')
    assert _cuts_at(tree) == [1, 2]
    assert all(name in MODULES for name in REFERENCE_HOMES | set(NOT_REFERENCES))


GIT_RUNNER = "trainops.gitinfo"


def _names_git(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "git" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == "git"
    first = node.elts[0] if isinstance(node, ast.List) and node.elts else None
    return isinstance(first, ast.Constant) and first.value == "git"


def _runs_git(tree: ast.AST) -> list[int]:
    """The lines that import GitPython or start a `git` process themselves (an argv list
    whose first item is "git")."""
    return sorted({node.lineno for node in ast.walk(tree) if _names_git(node)})


def test_git_runs_through_one_runner() -> None:
    """git is run one way, `trainops.gitinfo.git` (C locale, the caller's repository-locating
    variables dropped, a timeout): no GitPython, no subprocess of its own."""
    assert _offenders(_runs_git, {GIT_RUNNER}) == {}


def test_the_git_runner_finder_finds_runners() -> None:
    tree = ast.parse(
        "from git.cmd import Git\nimport git\nsubprocess.run(['git', 'log'])\n"
        "x = ['gitx']\nfrom trainops.gitinfo import git\n"
    )
    assert _runs_git(tree) == [1, 2, 3]
    assert GIT_RUNNER in MODULES


@pytest.mark.parametrize("name", sorted(name for name, path in MODULES.items() if path.name == "__init__.py"))
def test_a_package_gives_every_name_it_exports(name: str) -> None:
    """A lazy `__init__` (trainops.lazy) hands out each name of its `__all__` on first use."""
    import importlib

    package = importlib.import_module(name)
    missing = [item for item in getattr(package, "__all__", []) if not hasattr(package, item)]
    assert missing == []


CLOCK = "trainops.clock"
# Reading the wall clock in a form other than trainops.clock's, allowed where it names
# something rather than records a time.
OWN_CLOCK: dict[str, str] = {}
_CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("time", "strftime"),
                ("time", "gmtime"), ("time", "localtime"), ("time", "ctime"), ("date", "today")}  # fmt: skip


def _reads_the_clock(tree: ast.AST) -> list[int]:
    """The lines that read or format the wall clock themselves (`datetime.now(...)`, `time.strftime(...)`)."""
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and (node.func.value.id, node.func.attr) in _CLOCK_CALLS
    )


def test_times_come_from_the_one_clock() -> None:
    """One UTC clock and one time format: trainops.clock (now, iso, parse, display)."""
    assert _offenders(_reads_the_clock, {CLOCK, *OWN_CLOCK}) == {}


def test_the_clock_finder_finds_clock_reads() -> None:
    tree = ast.parse("a = datetime.now(timezone.utc)\nb = time.strftime('%H')\nc = time.monotonic()\nd = clock.now()\n")
    assert _reads_the_clock(tree) == [1, 2]
    assert CLOCK in MODULES and set(OWN_CLOCK) <= set(MODULES)


DESIGN = PACKAGE.parent / "docs" / "development" / "design.md"


def _design_layers(text: str) -> dict[str, int]:
    """The layer table of the design page: `| N | `room`, `room` | what |` rows."""
    import re

    layers: dict[str, int] = {}
    for line in text.splitlines():
        row = re.match(r"^\|\s*(\d+)\s*\|([^|]*)\|", line)
        if row:
            layers.update(dict.fromkeys(re.findall(r"`([a-z_]+)`", row[2]), int(row[1])))
    return layers


def test_the_design_page_states_these_layers() -> None:
    """docs/development/design.md describes the layers this test enforces, no other."""
    assert _design_layers(DESIGN.read_text(encoding="utf-8")) == LAYERS, (
        "the layers of tests/test_structure.py and docs/development/design.md differ: change both together"
    )


def test_the_design_table_reader_reads_rows() -> None:
    text = "| Layer | Rooms |\n|---|---|\n| 0 | `errors`, `manifest` | base |\n| 3 | `train` | training |\n"
    assert _design_layers(text) == {"errors": 0, "manifest": 0, "train": 3}


# What cli/train_cmds.py may import besides the CLI's own helpers, the foundation and the room:
# the ClusterAccess value it hands over whole.
TRAIN_CLI = "trainops.cli.train_cmds"
TRAIN_CLI_ALSO = {"trainops.cluster.access"}


def test_train_commands_reach_training_through_one_package() -> None:
    """The train commands call the train room; they do not reach render, slurm, cluster or
    pipeline for training themselves."""
    elsewhere = {
        dep
        for dep in GRAPH[TRAIN_CLI]
        if _package(dep) not in ("cli", "train") and LAYERS[_package(dep)] > 0 and dep not in TRAIN_CLI_ALSO
    }
    assert elsewhere == set()


def _compares_a_scheduler(tree: ast.AST) -> list[int]:
    """The lines that compare a `scheduler` (`train.scheduler == "slurm"`, `x.scheduler in (...)`)."""
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(isinstance(side, ast.Attribute) and side.attr == "scheduler" for side in [node.left, *node.comparators])
    )


def test_the_cli_never_chooses_a_scheduler() -> None:
    """Choosing the training target is the train room's (trainops.train.target), once."""
    cli = {name for name in MODULES if _package(name) != "cli"}
    assert _offenders(_compares_a_scheduler, cli) == {}


def test_the_scheduler_comparison_finder_finds_comparisons() -> None:
    tree = ast.parse('a = t.scheduler == "slurm"\nb = "x" in m.scheduler\nc = t.scheduler\nd = s == "slurm"\n')
    assert _compares_a_scheduler(tree) == [1, 2]


# -- the harness is a package -----------------------------------------------------------------

REPO = PACKAGE.parent
HARNESS = REPO / "trainops_testing"
# a script importing the script beside it (scripts/ is not a package); never tests/
PATH_EDITS_ALLOWED = {"scripts/vendor_kube_sources.py"}


def _path_edits(path: Path) -> list[int]:
    """The lines of `path` that change sys.path (sys.path.insert/append/extend, or assign it)."""

    def is_sys_path(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys"

    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Assign) and any(is_sys_path(t) for t in node.targets)) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append", "extend")
            and is_sys_path(node.func.value)
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_nothing_edits_sys_path_to_reach_the_harness() -> None:
    """Tests, benchmarks and scripts import the harness (trainops_testing) and tests' helpers
    as packages: an editable install puts the project's root on the path."""
    found = []
    for folder in ("trainops", "trainops_testing", "tests", "bench", "scripts"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith("tests/upstream/") or rel in PATH_EDITS_ALLOWED:
                continue
            found += [f"{rel}:{line}" for line in _path_edits(path)]
    assert found == []


def test_the_path_edit_finder_finds_edits(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("import sys\nsys.path.insert(0, 'tests')\nsys.path = []\nprint(sys.path)\n")
    assert _path_edits(source) == [2, 3]


def test_the_package_never_imports_its_harness() -> None:
    found = [
        name
        for name, path in MODULES.items()
        if "trainops_testing" in path.read_text(encoding="utf-8")
        and any(
            isinstance(node, (ast.Import, ast.ImportFrom))
            and any("trainops_testing" in (getattr(node, "module", None) or a.name) for a in node.names)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    ]
    assert found == []
    assert (HARNESS / "__init__.py").is_file()


def _imports_tests(path: Path) -> list[int]:
    """The lines of `path` that import the `tests` package or a module of it."""

    def is_tests(name: str | None) -> bool:
        return name is not None and (name == "tests" or name.startswith("tests."))

    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Import) and any(is_tests(a.name) for a in node.names))
        or (isinstance(node, ast.ImportFrom) and node.level == 0 and is_tests(node.module))
    )


def test_benchmarks_scripts_and_the_harness_never_import_tests() -> None:
    """What bench/ and scripts/ share with the tests lives in the harness package; the tests
    import it from there too."""
    found = [
        f"{path.relative_to(REPO).as_posix()}:{line}"
        for folder in ("bench", "scripts", "trainops_testing")
        for path in sorted((REPO / folder).rglob("*.py"))
        for line in _imports_tests(path)
    ]
    assert found == []


def test_the_tests_import_finder_finds_imports(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        "import tests.cli\nfrom tests.rollout.conftest import make_project\n"
        "def f():\n    from tests import conftest\nimport testsuite\nfrom . import tests\nfrom testing import x\n"
    )
    assert _imports_tests(source) == [1, 2, 4]
