"""What signing costs `release create`, and model signing's own CLI on the same model.

A project on a file:// registry holds one checkpoint of SIZE (a safetensors file of that
size plus a config); `trainops release create` makes a new release of it N times without
release.signing and N times with it (alternately, so drift in the machine's load hits both
alike). A signed release's model signature is built from the layer digests trainops already
has, so signing reads no byte of the weights: its cost is loading model_signing (and
sigstore under it), one ECDSA signature per statement, and two referrer pushes. The peer is
`model_signing sign key` on the same files, which must hash them.

Reports the median wall time of each, the overhead of signing (target: at most 10 % of an
unsigned `release create` of a 1 GiB model) and the peer's time.

    python bench/signing.py [--size-mib 1024] [-n 5] [--quick] [--check]

Writes bench/results/signing.json (bench/results/ is not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from harness import docresult

TARGET_OVERHEAD = 0.10
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "signing.json"


def tool(name: str) -> str:
    script = Path(sys.executable).with_name(name)
    return str(script) if script.is_file() else (shutil.which(name) or name)


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    return seconds


def weights(path: Path, size: int) -> None:
    """A safetensors file of about `size` bytes (one float32 tensor), written in 8 MiB blocks."""
    count = size // 4
    header = json.dumps({"w": {"dtype": "F32", "shape": [count], "data_offsets": [0, count * 4]}}).encode()
    header += b" " * (-len(header) % 8)
    block = os.urandom(8 * 1024 * 1024)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        left = count * 4
        while left:
            fh.write(block[: min(left, len(block))])
            left -= min(left, len(block))


def project(work: Path, size: int) -> Path:
    root = work / "project"
    (root / "ckpt").mkdir(parents=True)
    weights(root / "ckpt" / "model.safetensors", size)
    (root / "ckpt" / "config.json").write_text('{"model_type": "bench"}')
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (root / "release.pem").write_bytes(pem)
    for name, signing in (("plain.yaml", None), ("signed.yaml", {"key": "release.pem"})):
        release: dict[str, object] = {"source": "bench/checkpoints:step-1", "requireGates": False}
        if signing:
            release["signing"] = signing
        doc = {
            "apiVersion": "trainops.dev/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": "bench"},
            "spec": {"registry": "file://.trainops/registry", "release": release},
        }
        (root / name).write_text(yaml.safe_dump(doc))
    push = [tool("trainops"), "push", "ckpt", "bench/checkpoints:step-1", "--kind", "checkpoint", "--step", "1"]
    run([*push, "-f", "plain.yaml"], root)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("-n", type=int, default=5, help="releases of each kind")
    parser.add_argument("--quick", action="store_true", help="8 MiB, 2 runs each (CI)")
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 if signing adds over {TARGET_OVERHEAD * 100:.0f} %%"
    )
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/signing.json")
    args = parser.parse_args()
    load = docresult.Load()
    size, runs = (8, 2) if args.quick else (args.size_mib, args.n)
    with tempfile.TemporaryDirectory(prefix="bench-signing-") as scratch:
        root = project(Path(scratch), size * 1024 * 1024)
        env = {**os.environ, "TRAINOPS_CACHE_DIR": str(Path(scratch) / "cache")}
        plain: list[float] = []
        signed: list[float] = []
        for i in range(runs):
            for name, times in (("plain", plain), ("signed", signed)):
                create = [tool("trainops"), "release", "create", "--version", f"{name}-{i}", "-f", f"{name}.yaml"]
                times.append(run(create, root, env))
        sig = root / "model.sig"
        peer = run(
            [tool("model_signing"), "sign", "key", "--private_key", "release.pem", "--signature", str(sig), "ckpt"],
            root,
        )
        verify = [
            tool("trainops"),
            "release",
            "verify",
            "bench/model:signed-0",
            "--key",
            "release.pem",
            "-f",
            "signed.yaml",
        ]
        verified = run(verify, root, env)
    base, with_signing = statistics.median(plain), statistics.median(signed)
    overhead = with_signing / base - 1
    result = {
        "sizeMiB": size,
        "runs": runs,
        "releaseCreateS": round(base, 3),
        "releaseCreateSignedS": round(with_signing, 3),
        "overhead": round(overhead, 3),
        "modelSigningCliSignS": round(peer, 3),
        "releaseVerifyS": round(verified, 3),
        "loadAverage": os.getloadavg()[0],
        "machine": f"{platform.machine()} {os.cpu_count()} cpu",
    }
    print(json.dumps(result, indent=2))
    print(
        f"release create {size} MiB: {base:.2f} s unsigned, {with_signing:.2f} s signed "
        f"(+{overhead:.1%}, target <= {TARGET_OVERHEAD:.0%}); model_signing sign key: {peer:.2f} s; "
        f"release verify (pulls and checks every byte): {verified:.2f} s"
    )
    if not args.quick:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2))
    if args.doc and not args.quick:
        met = "✓" if overhead <= TARGET_OVERHEAD else "✗"
        docresult.write(
            docresult.default_path("signing"),
            benchmark="signing",
            title=f"What signing adds to release create ({runs} releases each way, alternately, file:// registry)",
            load=load,
            columns=[f"`release create`, {size} MiB", "unsigned", "signed", "signing adds", "target"],
            rows=[
                ["median wall time", f"{base:.2f} s", f"{with_signing:.2f} s", f"{overhead:+.0%}", f"≤ 10 % {met}"],
                ["peer: `model_signing sign key` on the same files (hashes them)", "—", f"{peer:.2f} s", "—", "—"],
                [
                    "`release verify` (signature, provenance, every byte pulled and checked)",
                    "—",
                    f"{verified:.2f} s",
                    "—",
                    "—",
                ],
            ],
        )
    if args.check and overhead > TARGET_OVERHEAD:
        raise SystemExit(f"signing adds {overhead:.1%} to release create, over {TARGET_OVERHEAD:.0%}")


if __name__ == "__main__":
    main()
