"""Media types, artifact types and annotation keys of trainops artifacts (see registry/SPEC.md)."""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Literal

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
OCI_LAYOUT_VERSION = "1.0.0"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST)

IMAGE_CONFIGS = ("application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json")

# CNCF ModelPack
MODEL_ARTIFACT = "application/vnd.cncf.model.manifest.v1+json"
MODEL_CONFIG = "application/vnd.cncf.model.config.v1+json"
WEIGHT_RAW = "application/vnd.cncf.model.weight.v1.raw"
WEIGHT_CONFIG_RAW = "application/vnd.cncf.model.weight.config.v1.raw"
DOC_RAW = "application/vnd.cncf.model.doc.v1.raw"
CODE_RAW = "application/vnd.cncf.model.code.v1.raw"
DATASET_RAW = "application/vnd.cncf.model.dataset.v1.raw"
MODELPACK_LAYER_TYPES = (WEIGHT_RAW, WEIGHT_CONFIG_RAW, DOC_RAW, CODE_RAW, DATASET_RAW)
# The ModelPack namespaces trainops reads: the CNCF one it writes, and the earlier CNAI one
# (modctl v0.2.x: `application/vnd.cnai.model.*`, file paths in `org.cnai.model.filepath`,
# each file in a tar layer by default). Layers of either are raw, or a tar (+gzip, +zstd).
MODELPACK_PREFIXES = ("application/vnd.cncf.model.", "application/vnd.cnai.model.")
MODEL_ARTIFACT_CNAI = "application/vnd.cnai.model.manifest.v1+json"
MODEL_CONFIG_CNAI = "application/vnd.cnai.model.config.v1+json"
MODEL_TYPES = (MODEL_ARTIFACT, MODEL_CONFIG, MODEL_ARTIFACT_CNAI, MODEL_CONFIG_CNAI)

# trainops
CONFIG = "application/vnd.trainops.config.v1+json"
Kind = Literal["checkpoint", "model", "dataset", "eval", "image", "other"]
KINDS: tuple[Kind, ...] = ("checkpoint", "model", "dataset", "eval", "image", "other")
ARTIFACT_TYPES: dict[str, str] = {
    "checkpoint": "application/vnd.trainops.checkpoint.v1",
    "model": MODEL_ARTIFACT,
    "dataset": "application/vnd.trainops.dataset.v1",
    "eval": "application/vnd.trainops.eval.v1",
    "other": "application/vnd.trainops.artifact.v1",
}

# Annotations
A_FILEPATH = "org.cncf.model.filepath"
A_FILEPATH_CNAI = "org.cnai.model.filepath"  # the same, as modctl v0.2.x writes it
A_TITLE = "org.opencontainers.image.title"
A_CREATED = "org.opencontainers.image.created"
A_REVISION = "org.opencontainers.image.revision"
A_SOURCE = "org.opencontainers.image.source"
A_REF_NAME = "org.opencontainers.image.ref.name"
A_KIND = "dev.trainops.kind"
A_LINEAGE = "dev.trainops.lineage"
A_FILE_MODE = "dev.trainops.file.mode"
A_CKPT_NAME = "dev.trainops.checkpoint.name"  # the checkpoint directory's own name (step-000300, …)
A_CKPT_LAYOUT = "dev.trainops.checkpoint.layout"  # trainops | huggingface | megatron | deepspeed | dcp
A_STAGE_KEY = "dev.trainops.stage.key"  # a stage record of `trainops run` (trainops.pipeline.cache)
# The repositories trainops keeps its records in, beside a pipeline's artifacts:
# <registry>/<pipeline>/incidents (trainops.faults) and <registry>/<pipeline>/stages
# (trainops.pipeline.cache). `registry ls` of a registry lists them only with --all.
BOOKKEEPING_REPOSITORIES = ("incidents", "stages")
PRUNED_TAG_PREFIX = "pruned-"  # tags of pruned records (trainops.registry.retention.tombstone)
A_VERSION = "org.opencontainers.image.version"

# Eval reports (trainops.eval): one layer of this type; the verdict and the evaluated
# checkpoint (ref@sha256:…) as manifest annotations
EVAL_REPORT = "application/vnd.trainops.eval.report.v1+json"
A_EVAL_PASSED = "dev.trainops.eval.passed"  # "true" | "false"
A_EVAL_CHECKPOINT = "dev.trainops.eval.checkpoint"

# Incidents and run timelines (trainops.faults): the record's media types, and the run,
# class, node and detection time of an incident as annotations (listings read no blob)
INCIDENT = "application/vnd.trainops.incident.v1+json"
TIMELINE = "application/vnd.trainops.timeline.v1+json"
A_INCIDENT_RUN = "dev.trainops.incident.run"
A_INCIDENT_CLASS = "dev.trainops.incident.class"
A_INCIDENT_NODE = "dev.trainops.incident.node"
A_INCIDENT_DETECTED = "dev.trainops.incident.detected"

# Releases (trainops.release): what was released, the eval that let it, and an override
A_RELEASE_CHECKPOINT = "dev.trainops.release.checkpoint"  # ref@sha256:…
A_RELEASE_EVAL = "dev.trainops.release.eval"  # ref@sha256:… of the report (absent if forced)
A_RELEASE_FORCED = "dev.trainops.release.forced"  # "true" when a gate was overridden
A_RELEASE_REASON = "dev.trainops.release.reason"
A_RELEASE_BY = "dev.trainops.release.by"

# Signatures and provenance (trainops.signing): Sigstore bundles attached as referrers, laid
# out as cosign's bundle referrers are (empty config, one bundle layer, the predicate type)
SIGSTORE_BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"
IN_TOTO = "application/vnd.in-toto+json"  # an unsigned in-toto statement (provenance without a key)
A_BUNDLE_PREDICATE = "dev.sigstore.bundle.predicateType"
A_BUNDLE_CONTENT = "dev.sigstore.bundle.content"  # "dsse-envelope"
A_SIGNING_KEY = "dev.trainops.signing.key"  # sha256:<hex> of the signer's PEM public key
MODEL_SIGNING_PREDICATE = "https://model_signing/signature/v1.0"
MODEL_SIGNATURE_FILE = "model.sig"  # where model signing writes its signature, at a model's top
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
RECORDS = {MODEL_SIGNING_PREDICATE: "signature", SLSA_PROVENANCE: "provenance"}  # a record by its predicate

_WEIGHTS = (
    "*.safetensors",
    "*.bin",
    "*.pt",
    "*.pth",
    "*.ckpt",
    "*.gguf",
    "*.onnx",
    "*.npy",
    "*.npz",
    "*.h5",
    "*.msgpack",
    "*.distcp",
    "*.tflite",
    "*.mlmodel",
)
_DOCS = ("README*", "*.md", "LICENSE*", "NOTICE*", "*.rst")
_CODE = ("*.py", "*.sh", "*.ipynb")
_DATA = ("*.parquet", "*.arrow", "*.jsonl", "*.tfrecord", "*.csv", "*.tar", "*.idx")


def layer_media_type(relpath: str, kind: str) -> str:
    """The ModelPack layer media type of a file, by its name (and the artifact kind)."""
    name = relpath.rsplit("/", 1)[-1]
    if kind == "dataset":
        return DATASET_RAW
    for patterns, media in ((_WEIGHTS, WEIGHT_RAW), (_DOCS, DOC_RAW), (_CODE, CODE_RAW)):
        if any(fnmatch(name, p) for p in patterns):
            return media
    if any(fnmatch(name, p) for p in _DATA):
        return DATASET_RAW
    return WEIGHT_CONFIG_RAW


def packing(media_type: str) -> str | None:
    """How a ModelPack layer holds its file: None for raw (the file's bytes), else "tar",
    "tar+gzip" or "tar+zstd" (a tar archive of the file, as modctl packs each file)."""
    if not media_type.startswith(MODELPACK_PREFIXES):
        return None
    for packed in ("tar", "tar+gzip", "tar+zstd"):
        if media_type.endswith(f".{packed}"):
            return packed
    return None


def kind_of(artifact_type: str | None, annotations: dict[str, str] | None) -> str:
    """The trainops kind of a manifest, also for artifacts other tools pushed."""
    if annotations and annotations.get(A_KIND) in KINDS:
        return annotations[A_KIND]
    for kind, atype in ARTIFACT_TYPES.items():
        if atype == artifact_type:
            return kind
    if artifact_type in MODEL_TYPES:  # a ModelPack model (either namespace; or without artifactType)
        return "model"
    if artifact_type in IMAGE_CONFIGS:  # an image pushed by an engine, skopeo or podman
        return "image"
    return "image" if artifact_type is None else "other"


# Chunked checkpoints (trainops.registry.chunks): packs of content-defined chunks, and one
# chunk index per file; the index layer names its file, the file's digest and size
CHUNK_PACK = "application/vnd.trainops.chunk.pack.v1"
CHUNK_INDEX = "application/vnd.trainops.chunk.index.v1+json"
A_CHUNKS_FILEPATH = "dev.trainops.chunks.filepath"
A_CHUNKS_DIGEST = "dev.trainops.chunks.digest"  # sha256:… of the whole file
A_CHUNKS_SIZE = "dev.trainops.chunks.size"  # bytes of the whole file
A_DEDUP = "dev.trainops.dedup"  # "chunks" on a chunked artifact's manifest
