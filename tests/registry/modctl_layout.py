"""A model laid out exactly as modctl v0.2.2 (`modctl build` + `modctl push`) lays it out:
the CNAI ModelPack namespace (artifactType application/vnd.cnai.model.manifest.v1+json,
config application/vnd.cnai.model.config.v1+json), one layer per file, each file in a tar
archive of its own (modctl's default) named by its path, the path in the layer's
`org.cnai.model.filepath` annotation; a raw layer too (`--raw`), as modctl can write."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from trainops.registry.backends.base import Backend, BlobSource, Descriptor, ManifestData, sha256_digest

CNAI = "application/vnd.cnai.model"
ARTIFACT_TYPE = f"{CNAI}.manifest.v1+json"
CONFIG_TYPE = f"{CNAI}.config.v1+json"
FILEPATH = "org.cnai.model.filepath"
MTIME = 1_760_000_000


def model_dir(root: Path) -> Path:
    """A small real model: safetensors weights (a nested path too), its config, a README."""
    root.mkdir(parents=True)
    save_file(
        {"embed": np.arange(64 * 16, dtype=np.float32).reshape(64, 16), "bias": np.zeros(16, np.float16)},
        str(root / "model.safetensors"),
    )
    (root / "config.json").write_text(json.dumps({"architectures": ["TinyForCausalLM"], "model_type": "tiny"}))
    (root / "README.md").write_text("# tiny\n")
    (root / "tokenizer").mkdir()
    (root / "tokenizer" / "tokenizer.json").write_text('{"version": "1.0"}')
    (root / "generation_config.json").write_text('{"max_new_tokens": 8}')
    return root


def _tar(path: Path, relpath: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = archive.gettarinfo(str(path), arcname=relpath)
        info.mtime, info.uid, info.gid, info.uname, info.gname = MTIME, 0, 0, "", ""
        with path.open("rb") as fh:
            archive.addfile(info, fh)
    return out.getvalue()


LAYERS = {  # relpath → media type, as modctl's Modelfile defaults assign them
    "config.json": f"{CNAI}.weight.config.v1.tar",
    "generation_config.json": f"{CNAI}.weight.config.v1.raw",
    "tokenizer/tokenizer.json": f"{CNAI}.weight.config.v1.tar",
    "README.md": f"{CNAI}.doc.v1.tar",
    "model.safetensors": f"{CNAI}.weight.v1.tar",
}


def push_modctl(backend: Backend, repo: str, tag: str, model: Path) -> str:
    """Push model's files as modctl does; the manifest's digest."""
    layers = []
    for relpath, media_type in LAYERS.items():
        raw = (model / relpath).read_bytes()
        data = raw if media_type.endswith(".raw") else _tar(model / relpath, relpath)
        layers.append(Descriptor(media_type, sha256_digest(data), len(data), {FILEPATH: relpath}))
        backend.upload_blob(repo, BlobSource(sha256_digest(data), len(data), opener=lambda d=data: io.BytesIO(d)))
    config = json.dumps(
        {
            "descriptor": {"createdAt": "2025-10-09T08:53:20Z", "name": "tiny"},
            "config": {"format": "safetensors", "paramSize": "1.0k"},
            "modelfs": {"type": "layers", "diffIds": [layer.digest for layer in layers]},
        }
    ).encode()
    backend.upload_blob(repo, BlobSource(sha256_digest(config), len(config), opener=lambda: io.BytesIO(config)))
    body = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": sha256_digest(config), "size": len(config)},
        "layers": [layer.as_oci() for layer in layers],
    }
    data = json.dumps(body).encode()
    manifest = ManifestData(data, "application/vnd.oci.image.manifest.v1+json", sha256_digest(data))
    backend.put_manifest(repo, manifest, tag=tag)
    return manifest.digest
