"""A registry the browser tests read: one lineage chain from a git commit to a model, with
an eval report as a referrer, a pruned checkpoint, and one hostile artifact."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from registry.conftest import make_tree

from trainops.registry import media
from trainops.registry.artifact import canonical_json
from trainops.registry.backends.base import Descriptor, ManifestData, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage, Parent
from trainops.registry.retention.tombstone import write_record
from trainops.registry.store import bytes_source, push, resolve

COMMIT = "0123456789abcdef0123456789abcdef01234567"
RUN = "run-42"
HOSTILE = "<script>window.__pwned=1;alert('x')</script>"
HOSTILE_FILE = "<img src=x onerror=alert(1)>.bin"
STEPS = (100, 200, 300, 400)
LOSS = {100: 3.5, 200: 2.75, 300: 2.25, 400: 2.0}


@dataclass
class Filled:
    url: str
    dataset: str = ""
    checkpoints: dict[int, str] = field(default_factory=dict)  # step -> digest
    pruned: int = 100  # the step whose checkpoint was pruned (only its record remains)
    eval_report: str = ""
    model: str = ""
    image: str = ""
    hostile: str = ""

    def repo(self, name: str) -> str:
        return f"{self.url}/{name}"


def push_image(registries: Registries, ref: str) -> str:
    """An image as an engine pushes one: an OCI image manifest whose config carries the
    trainops lineage in its labels (engines cannot annotate manifests). Its digest."""
    target = registries.ref(ref)
    backend = registries.backend(target)
    layer = bytes_source(b"not really a tar, but a blob all the same")
    labels = {
        media.A_LINEAGE: canonical_json(Lineage(git_commit=COMMIT).as_json()).decode(),
        media.A_REVISION: COMMIT,
        media.A_CREATED: "2026-12-01T00:00:00Z",
    }
    config = bytes_source(
        canonical_json(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Labels": labels},
                "rootfs": {"type": "layers", "diff_ids": [layer.digest]},
            }
        )
    )
    for blob in (layer, config):
        backend.upload_blob(target.repository, blob)
    body = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "config": {"mediaType": media.IMAGE_CONFIGS[0], "digest": config.digest, "size": config.size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer.digest, "size": layer.size}],
    }
    data = canonical_json(body)
    manifest = ManifestData(data, media.OCI_MANIFEST, sha256_digest(data))
    backend.put_manifest(target.repository, manifest, tag=target.tag)
    return manifest.digest


def fill(registries: Registries, url: str, work: Path) -> Filled:
    """Push the sample artifacts into the registry at url."""
    out = Filled(url)
    ref = registries.ref
    data = push(
        registries,
        source=make_tree(work / "data", {"train.jsonl": b'{"x": 1}\n'}),
        ref=ref(out.repo("tiny/data:v1")),
        kind="dataset",
    )
    out.dataset = data.digest
    out.image = push_image(registries, out.repo("tiny/image:abc123"))
    previous: Parent = Parent(digest=data.digest, ref=out.repo("tiny/data:v1"), relation="dataset")
    for step in STEPS:
        tree = make_tree(
            work / f"step-{step}", {"model.safetensors": f"weights {step}".encode(), "trainer_state.json": b"{}"}
        )
        lineage = Lineage(
            git_commit=COMMIT,
            image_digest=out.image,
            run_id=RUN,
            step=step,
            metrics={"loss": LOSS[step], "lr": 0.001},
            parents=[previous],
        )
        pushed = push(
            registries,
            source=tree,
            ref=ref(out.repo(f"tiny/checkpoints:step-{step}")),
            kind="checkpoint",
            lineage=lineage,
        )
        out.checkpoints[step] = pushed.digest
        previous = Parent(digest=pushed.digest, ref=out.repo(f"tiny/checkpoints:step-{step}"), relation="resumed-from")
    # retention pruned the first checkpoint: a record takes its place, the manifest goes
    first = ref(out.repo("tiny/checkpoints"))
    found = resolve(registries, ref=first.with_tag(f"step-{STEPS[0]}"))
    write_record(registries, repository=first, parsed=found.parsed, shown=out.repo(f"tiny/checkpoints:step-{STEPS[0]}"))
    registries.backend(first).delete_manifest(first.repository, found.manifest.digest)
    last = STEPS[-1]
    subject = resolve(registries, ref=ref(out.repo(f"tiny/checkpoints:step-{last}")))
    report_json = (
        b'{"gates":[{"actual":1.9,"metric":"val_loss","op":"<=","passed":true,"value":2.5}],'
        b'"metrics":{"val_loss":1.9},"passed":true,"schemaVersion":1}'
    )
    report = push(
        registries,
        source=make_tree(work / "eval", {"eval-report.json": report_json}),
        ref=ref(out.repo("tiny/checkpoints:eval-step-400")),
        kind="eval",
        lineage=Lineage(
            git_commit=COMMIT,
            metrics={"val_loss": 1.9},
            parents=[
                Parent(digest=subject.manifest.digest, ref=out.repo("tiny/checkpoints:step-400"), relation="evaluated")
            ],
        ),
        annotations={"dev.trainops.eval.passed": "true"},
        subject=Descriptor(media.OCI_MANIFEST, subject.manifest.digest, len(subject.manifest.data)),
    )
    out.eval_report = report.digest
    model = push(
        registries,
        source=make_tree(work / "model", {"model.safetensors": b"exported", "README.md": b"# tiny"}),
        ref=ref(out.repo("tiny/model:v1")),
        kind="model",
        lineage=Lineage(
            git_commit=COMMIT,
            parents=[
                Parent(digest=out.checkpoints[last], ref=out.repo("tiny/checkpoints:step-400"), relation="derived-from")
            ],
        ),
    )
    out.model = model.digest
    hostile = push(
        registries,
        source=make_tree(work / "hostile", {HOSTILE_FILE: b"x", "ok.txt": b"y"}),
        ref=ref(out.repo("tiny/hostile:v1")),
        kind="checkpoint",
        lineage=Lineage(step=1, run_id=HOSTILE, metrics={HOSTILE: 1.0}),
        annotations={"note": HOSTILE, "org.opencontainers.image.description": "</script><script>alert(2)</script>"},
    )
    out.hostile = hostile.digest
    return out
