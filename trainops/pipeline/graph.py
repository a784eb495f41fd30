"""The stage graph of a manifest: which stages it defines, what each needs, in what order.

    image → train → checkpoint → eval → release → rollout

A stage is in the graph when its section is (checkpoint comes with train, or with a
checkpoint reference in eval/release). Its needs are the stages before it that the
manifest defines. `select` cuts the window `--from`/`--to` out of the order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainops.errors import InputError, UsageError
from trainops.manifest import Manifest

STAGES = ("image", "train", "checkpoint", "eval", "release", "rollout")
_WANTS: Mapping[str, tuple[str, ...]] = {
    "image": (),
    "train": ("image",),
    "checkpoint": ("train",),
    "eval": ("checkpoint",),
    "release": ("checkpoint", "eval"),
    "rollout": ("release",),
}


@dataclass(frozen=True)
class Node:
    name: str
    needs: tuple[str, ...]


def _defined(manifest: Manifest) -> list[str]:
    spec = manifest.pipeline.spec
    present = {
        "image": spec.image is not None or (spec.train is not None and spec.train.image is not None),
        "train": spec.train is not None,
        "checkpoint": spec.train is not None or spec.eval is not None or spec.release is not None,
        "eval": spec.eval is not None,
        "release": spec.release is not None,
        "rollout": spec.rollout is not None,
    }
    return [name for name in STAGES if present[name]]


def build_graph(*, manifest: Manifest) -> list[Node]:
    """The manifest's stages in a valid order, each with the stages it needs."""
    names = _defined(manifest)
    nodes = {name: Node(name, tuple(n for n in _WANTS[name] if n in names)) for name in names}
    return order(nodes)


def order(nodes: Mapping[str, Node]) -> list[Node]:
    """Topological order (stable: flow order among ready stages); a cycle is an InputError."""
    done: list[Node] = []
    placed: set[str] = set()
    pending = dict(nodes)
    while pending:
        node = next((n for n in pending.values() if all(d in placed or d not in nodes for d in n.needs)), None)
        if node is None:
            raise InputError(f"the stage graph has a cycle: {_cycle(pending)}", hint="a stage cannot need itself")
        done.append(node)
        placed.add(node.name)
        del pending[node.name]
    return done


def _cycle(pending: Mapping[str, Node]) -> str:
    start = next(iter(pending))
    path, seen, name = [start], {start}, start
    while True:
        name = next(d for d in pending[name].needs if d in pending)
        path.append(name)
        if name in seen:
            return " → ".join(path[path.index(name) :])
        seen.add(name)


def select(nodes: Sequence[Node], *, start: str | None, stop: str | None) -> list[str]:
    """The names of the stages from `start` to `stop` (both included), checked."""
    names = [n.name for n in nodes]
    for option, value in (("--from", start), ("--to", stop)):
        if value is None:
            continue
        if value not in STAGES:
            raise UsageError(f"{option} {value}: no such stage; the stages are {', '.join(STAGES)}")
        if value not in names:
            raise UsageError(
                f"{option} {value}: the manifest defines no {value} stage; it has {', '.join(names) or 'none'}"
            )
    first = names.index(start) if start else 0
    last = names.index(stop) if stop else len(names) - 1
    if first > last:
        raise UsageError(f"--from {start} comes after --to {stop}; the order is {' → '.join(names)}")
    return names[first : last + 1]
