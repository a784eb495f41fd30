"""The model card (README.md) of an export, written from the artifact's lineage.

What it says comes from the registry alone: the artifact's lineage (source commit and
repository, run, step, metrics) and its ancestors' (the nearest checkpoint, eval reports
with their metrics, gates and verdict, datasets), walked with trainops.registry.lineage.
Every value is text from an artifact, so table cells are flattened to one line and pipes
escaped; nothing else (no secret) is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops.errors import TrainopsError
from trainops.registry.context import Registries
from trainops.registry.lineage import Graph, Node, lineage_graph
from trainops.registry.lineage_data import Lineage
from trainops.registry.store import Resolved, resolve
from trainops.templating import render_template


@dataclass(frozen=True)
class GateLine:
    metric: str
    op: str
    value: float
    actual: float | None
    passed: bool


@dataclass(frozen=True)
class EvalFacts:
    ref: str
    passed: bool | None
    metrics: dict[str, float] = field(default_factory=dict)
    gates: list[GateLine] = field(default_factory=list)


@dataclass(frozen=True)
class CardFacts:
    repo_id: str
    source: str  # ref@digest of the exported artifact
    created: str | None
    git_commit: str | None
    git_repo: str | None
    run_id: str | None
    step: int | None
    checkpoint: str | None
    metrics: dict[str, float]
    evals: list[EvalFacts]
    datasets: list[str]
    parents: list[str]  # "relation kind ref@digest", one per edge of the lineage


def _cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def _at(node: Node) -> str:
    return f"{node.ref}@{node.digest}"


def _resolve(registries: Registries, node: Node) -> Resolved | None:
    try:
        return resolve(registries, ref=registries.ref(node.ref).with_tag(None).with_digest(node.digest))
    except TrainopsError:
        return None


def _eval_facts(registries: Registries, node: Node) -> EvalFacts:
    """An eval ancestor's verdict, metrics and gates, from its report (trainops.eval);
    a report that cannot be read leaves only what the lineage node knows."""
    from trainops.eval.report import read_report  # lazy: loads pydantic

    try:
        entry = read_report(registries, ref=registries.ref(node.ref).with_tag(None).with_digest(node.digest))
    except TrainopsError:
        return EvalFacts(ref=_at(node), passed=None, metrics=dict(node.metrics))
    report = entry.report
    gates = [GateLine(g.metric, g.op, g.value, g.actual, g.passed) for g in report.gates]
    return EvalFacts(ref=_at(node), passed=report.passed, metrics=dict(report.metrics), gates=gates)


def _nearest(graph: Graph, kind: str) -> Node | None:
    """The ancestor of that kind reached first (lineage edges are in walk order)."""
    for edge in graph.edges:
        node = graph.nodes.get(edge.parent)
        if node is not None and node.kind == kind and not node.missing:
            return node
    return None


def collect_facts(registries: Registries, *, found: Resolved, repo_id: str) -> CardFacts:
    """What the card says about found, from its lineage and its ancestors'."""
    graph = lineage_graph(registries, ref=found.ref, direction="up")
    lineage = found.parsed.lineage()
    checkpoint = (
        graph.nodes[found.manifest.digest] if found.parsed.kind == "checkpoint" else _nearest(graph, "checkpoint")
    )
    ckpt_found = _resolve(registries, checkpoint) if checkpoint is not None else None
    ckpt = ckpt_found.parsed.lineage() if ckpt_found is not None else Lineage()
    evals = [_eval_facts(registries, n) for n in graph.nodes.values() if n.kind == "eval" and not n.missing]
    datasets = [_at(graph.nodes[e.parent]) for e in graph.edges if e.relation == "dataset" and e.parent in graph.nodes]
    parents = [
        f"{e.relation}: {graph.nodes[e.parent].kind} `{_at(graph.nodes[e.parent])}`"
        for e in graph.edges
        if e.parent in graph.nodes
    ]
    return CardFacts(
        repo_id=repo_id,
        source=f"{found.ref.with_tag(None).with_digest(None)}@{found.manifest.digest}",
        created=found.parsed.created,
        git_commit=lineage.git_commit or ckpt.git_commit,
        git_repo=lineage.git_repo or ckpt.git_repo,
        run_id=lineage.run_id or ckpt.run_id,
        step=lineage.step if lineage.step is not None else ckpt.step,
        checkpoint=_at(checkpoint) if checkpoint and checkpoint.digest != found.manifest.digest else None,
        metrics=dict(lineage.metrics) or dict(ckpt.metrics),
        evals=evals,
        datasets=sorted(set(datasets)),
        parents=parents,
    )


def render_card(facts: CardFacts) -> str:
    """README.md with Hub metadata (YAML front matter) and the facts as tables."""

    name = facts.repo_id.rsplit("/", 1)[-1]
    return render_template("hub/model-card.md.j2", facts=facts, title=name, cell=_cell)


def has_card(files: list[str]) -> bool:
    return any(path.lower() == "readme.md" for path in files)
