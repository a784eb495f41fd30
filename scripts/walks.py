"""The walks of a value through the package, measured by tracing a real command.

Two walks over a copy of examples/tiny-llm in its `dev` environment (local training, the
file:// registry): the run id of `train run --local`, and the reference of `release create`
(after `eval run` of the best checkpoint). Each command runs in-process
(`trainops.cli.main.main`, as tests/cli/runner.py runs it) under `sys.setprofile` and
`threading.setprofile`; every call of a function defined in trainops/ is recorded with its
nearest trainops caller. For each walk it reports:

- executed: the trainops files (and rooms: the first folder under trainops/, or the module
  at its root) with at least one function called during the command;
- carried: the files and rooms with a function called with the value among its arguments
  (a str containing it, or an object, list, tuple or dict holding such a str one level
  down): the run id itself, and for `release create` a string naming the checkpoint
  repository (`tiny-llm/checkpoints`) or a trainops `Reference` to it;
- climbs: distinct (caller file, called function) pairs where the caller's room is in a
  lower layer than the called one's (docs/development/design.md's layers, read from
  tests/test_structure.py), of all calls and of the calls carrying the value. The caller is
  the nearest trainops frame (a log record reaching the CLI's handler through `logging`
  counts); since no import points up, every climb is a function, method or generator a
  higher room handed down.

    python scripts/walks.py [--json] [--files]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKAGE = str(REPO / "trainops") + os.sep
RUN_ID = "walk-3f9c2a"
CHECKPOINTS = "tiny-llm/checkpoints"


def _layers() -> dict[str, int]:
    """LAYERS of tests/test_structure.py, which holds design.md's table."""
    spec = importlib.util.spec_from_file_location("_structure", REPO / "tests" / "test_structure.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.LAYERS)


def room(path: str) -> str:
    parts = Path(path[len(PACKAGE) :]).with_suffix("").parts
    return parts[0]


@dataclass
class Walk:
    name: str
    needle: str
    executed: set[str] = field(default_factory=set)
    carried: set[str] = field(default_factory=set)
    climbs: set[tuple[str, str]] = field(default_factory=set)
    carried_climbs: set[tuple[str, str]] = field(default_factory=set)
    entries: dict[str, int] = field(default_factory=dict)  # carried calls per file


def _holds(value: Any, needle: str, depth: int = 1) -> bool:
    if isinstance(value, str):
        return needle in value
    if isinstance(value, (bytes, int, float, bool)) or value is None:
        return False
    if isinstance(value, os.PathLike):
        return needle in os.fspath(value)  # type: ignore[operator]
    if depth < 0:
        return False
    if isinstance(value, dict):
        items: list[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    else:
        fields = getattr(type(value), "__dataclass_fields__", None)
        try:
            if fields is not None:
                items = [getattr(value, f, None) for f in fields]
            elif hasattr(value, "__dict__"):
                items = list(vars(value).values())
            else:
                items = [getattr(value, s, None) for s in getattr(type(value), "__slots__", ())]
        except Exception:  # a value that cannot be read is not carrying
            return False
        if type(value).__name__ == "Reference" and any(isinstance(i, str) and needle in i for i in items):
            return True
    return any(_holds(item, needle, depth - 1) for item in items[:50])


@contextlib.contextmanager
def traced(walk: Walk, layers: dict[str, int]) -> Iterator[None]:
    def caller_of(frame: FrameType) -> str | None:
        back = frame.f_back
        while back is not None:
            if back.f_code.co_filename.startswith(PACKAGE):
                return back.f_code.co_filename
            back = back.f_back
        return None

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        path = code.co_filename
        if not path.startswith(PACKAGE) or code.co_name == "<module>":
            return
        walk.executed.add(path)
        caller = caller_of(frame)
        climb = caller is not None and layers.get(room(caller), 0) < layers.get(room(path), 0)
        if climb:
            assert caller is not None
            walk.climbs.add((caller, f"{path}:{code.co_name}"))
        nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
        local = frame.f_locals
        if any(_holds(local.get(name), walk.needle) for name in code.co_varnames[:nargs]):
            walk.carried.add(path)
            walk.entries[path] = walk.entries.get(path, 0) + 1
            if climb:
                assert caller is not None
                walk.carried_climbs.add((caller, f"{path}:{code.co_name}"))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _project(root: Path) -> Path:
    """A copy of examples/tiny-llm; its `dev` environment trains here (local, no GPUs)."""
    shutil.copytree(REPO / "examples" / "tiny-llm", root, ignore=shutil.ignore_patterns(".trainops", "__pycache__"))
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # its `python`
    return root / "trainops.yaml"


def _trainops(manifest: Path, *args: str) -> None:
    from trainops.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*args, "-f", str(manifest), "--env", "dev"])
    if code != 0:
        raise SystemExit(f"trainops {' '.join(args)} exited {code}:\n{err.getvalue()[-2000:]}")


def measure() -> list[Walk]:
    import trainops.cli.main  # noqa: F401  (imports are not part of a walk)

    layers = _layers()
    with tempfile.TemporaryDirectory(prefix="trainops-walks-") as tmp:
        root = Path(tmp) / "tiny-llm"
        os.environ["TRAINOPS_CACHE_DIR"] = str(Path(tmp) / "cache")
        manifest = _project(root)
        cwd = os.getcwd()
        os.chdir(root)
        try:
            run = Walk("the run id of `train run --local`", RUN_ID)
            with traced(run, layers):
                _trainops(manifest, "train", "run", "--local", "--run-id", RUN_ID, "--interval", "0.2")
            _trainops(manifest, "eval", "run")
            release = Walk("the reference of `release create`", CHECKPOINTS)
            with traced(release, layers):
                _trainops(manifest, "release", "create")
        finally:
            os.chdir(cwd)
    return [run, release]


def summary(walk: Walk, layers: dict[str, int], files: bool) -> dict[str, Any]:
    def rel(path: str) -> str:
        return path[len(PACKAGE) :]

    out: dict[str, Any] = {
        "walk": walk.name,
        "executedFiles": len(walk.executed),
        "executedRooms": len({room(p) for p in walk.executed}),
        "carriedFiles": len(walk.carried),
        "carriedRooms": len({room(p) for p in walk.carried}),
        "climbs": len(walk.climbs),
        "carriedClimbs": len(walk.carried_climbs),
        "climbPairs": sorted(f"{rel(a)} -> {rel(b)}" for a, b in walk.climbs),
        "carriedRoomList": sorted({room(p) for p in walk.carried}, key=lambda r: (layers.get(r, 0), r)),
    }
    if files:
        out["carriedFileList"] = {rel(p): walk.entries[p] for p in sorted(walk.carried)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--files", action="store_true", help="also list the files that carry the value")
    args = parser.parse_args(argv)
    layers = _layers()
    results = [summary(w, layers, args.files) for w in measure()]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        print(
            f"{r['walk']}: executed {r['executedFiles']} files in {r['executedRooms']} rooms; "
            f"carried by {r['carriedFiles']} files in {r['carriedRooms']} rooms "
            f"({', '.join(r['carriedRoomList'])}); climbs back up: {r['climbs']} "
            f"({r['carriedClimbs']} carrying it)"
        )
        for pair in r["climbPairs"]:
            print(f"  climb: {pair}")
        for path, calls in r.get("carriedFileList", {}).items():
            print(f"  {path}: {calls} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
