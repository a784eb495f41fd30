"""Chunked checkpoints (`--dedup chunks`) against plain pushes, same data, same registry, one run.

Starts its own Distribution registry and moto S3 server on free loopback ports (the helpers
the tests use) and measures, for the plain push (one blob per file) and the chunked one:

- a fine-tune series: a safetensors model whose even tensors are frozen and odd ones change
  every checkpoint — bytes sent per new checkpoint as a share of its size, for the
  chunker cutting at tensor boundaries first ("tensors") and for plain CDC ("whole");
- a 1 MiB change inside one file: the share of the file sent again;
- nothing shared (new random data): push time, chunked / plain;
- pull of a chunked checkpoint against the plain pull of the same files: time ratio (new
  data: each file its own pack), and of the fine-tune series' last checkpoint (read from
  the packs of the whole series);
- peak RSS of a chunked push of a 1 MiB change against its parent and of its pull, each
  its own process, at two sizes: flat if the size does not show;
- `release create` from a chunked checkpoint: rebuilding per-file blobs (a verified pull of
  the files, then a plain push) against assembling a plain checkpoint's blobs in place;
- the chunker: MB/s of pyfastcdc (Cython and its pure-Python fallback) and, when
  installed, fastcdc's Cython build, on random data held in memory;
- the same fine-tune series on s3:// (moto, sized in MiB: moto is slow for big objects).

Transfers run in this process through the library (trainops.registry.store/pulling), plain
and chunked alternately, each on a fresh repository; peak memory is bench/growth.py's (a
process per cell). Writes bench/results/dedup.json (not in --quick).

    python bench/dedup.py            # 256 MiB series and change, 1 GiB pull, 64 MiB on S3
    python bench/dedup.py --quick    # 16 MiB everywhere: seconds (CI)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops.registry import pulling, store  # noqa: E402
from trainops.registry.chunks import chunker  # noqa: E402
from trainops.registry.context import Registries  # noqa: E402
from trainops.registry.lineage_data import Lineage, Parent  # noqa: E402
from trainops_testing.finetune import FineTune  # noqa: E402
from trainops_testing.services import DistributionRegistry, MotoS3  # noqa: E402

MiB = 1024 * 1024


@dataclass
class Results:
    series: dict[str, list[float]] = field(default_factory=dict)  # mode → share sent per new checkpoint
    change_share: dict[str, float] = field(default_factory=dict)
    push_new: dict[str, float] = field(default_factory=dict)  # seconds
    pull: dict[str, float] = field(default_factory=dict)
    release: dict[str, float] = field(default_factory=dict)
    chunkers: dict[str, float] = field(default_factory=dict)  # MB/s
    s3_series: dict[str, list[float]] = field(default_factory=dict)
    s3_seconds: dict[str, float] = field(default_factory=dict)
    series_pull: dict[str, float] = field(default_factory=dict)  # seconds: a checkpoint read from packs
    memory: list[dict[str, float]] = field(default_factory=list)  # peak RSS (MB) of a second push and its pull
    sizes_mib: dict[str, int] = field(default_factory=dict)


def _push(reg: Registries, url: str, src: Path, *, dedup: str, parent: str | None = None) -> store.PushResult:
    lineage = Lineage(parents=(Parent(digest=parent, ref="-", relation="parent"),) if parent else ())
    ref = reg.ref(url)
    return store.push(reg, source=src, ref=ref, kind="checkpoint", lineage=lineage, dedup=dedup)


def _repo(base: str) -> str:
    return f"{base}/b{uuid.uuid4().hex[:8]}"


def series(
    reg: Registries, base: str, work: Path, *, total: int, steps: int, pulls: dict[str, float] | None = None
) -> dict[str, list[float]]:
    """Share of each new checkpoint sent: plain, chunked (tensors first), chunked (whole);
    pulls, if given, gets the seconds to pull the last checkpoint, plain and chunked (its
    files rebuilt from the packs of every checkpoint of the series)."""
    tensors = 32
    ft = FineTune(tensors=tensors, tensor_size=total // tensors)
    dirs = [ft.checkpoint(work / f"series-{i}") for i in range(steps)]
    out: dict[str, list[float]] = {}
    for mode in ("off", "tensors", "whole"):
        chunker.DEFAULT_SEGMENTS = mode if mode != "off" else "tensors"
        repo, parent, shares = _repo(base), None, []
        for i, src in enumerate(dirs):
            r = _push(reg, f"{repo}:step-{i}", src, dedup="off" if mode == "off" else "chunks", parent=parent)
            parent = r.digest
            if i:
                shares.append(r.bytes_sent / r.bytes_total)
        out["plain" if mode == "off" else f"chunked ({mode})"] = shares
        if pulls is not None and mode != "whole":
            started = time.perf_counter()
            pulling.pull(reg, ref=reg.ref(f"{repo}:step-{steps - 1}"), dest=work / "series-pulled")
            pulls["plain" if mode == "off" else "chunked"] = time.perf_counter() - started
            shutil.rmtree(work / "series-pulled")
    chunker.DEFAULT_SEGMENTS = "tensors"
    for d in dirs:
        shutil.rmtree(d)
    return out


def change(reg: Registries, base: str, work: Path, *, size: int) -> dict[str, float]:
    data = bytearray(os.urandom(size))
    a, b = work / "change-a", work / "change-b"
    a.mkdir()
    b.mkdir()
    (a / "model.bin").write_bytes(data)
    middle = size // 2 + 12345
    data[middle : middle + MiB] = os.urandom(MiB)
    (b / "model.bin").write_bytes(data)
    out = {}
    for dedup in ("off", "chunks"):
        repo = _repo(base)
        first = _push(reg, f"{repo}:step-1", a, dedup=dedup)
        second = _push(reg, f"{repo}:step-2", b, dedup=dedup, parent=first.digest)
        out["plain" if dedup == "off" else "chunked"] = second.bytes_sent / size
    shutil.rmtree(a)
    shutil.rmtree(b)
    return out


def _random_dir(path: Path, size: int) -> Path:
    path.mkdir()
    with (path / "model.bin").open("wb") as fh:
        left = size
        while left:
            piece = os.urandom(min(left, 8 * MiB))
            fh.write(piece)
            left -= len(piece)
    return path


def push_new(reg: Registries, base: str, work: Path, *, size: int, runs: int) -> dict[str, float]:
    """Median seconds to push new random data, plain and chunked alternating, cold caches."""
    times: dict[str, list[float]] = {"plain": [], "chunked": []}
    for i in range(runs):
        for dedup in ("off", "chunks") if i % 2 == 0 else ("chunks", "off"):
            src = _random_dir(work / f"new-{i}-{dedup}", size)
            started = time.perf_counter()
            _push(reg, f"{_repo(base)}:v1", src, dedup=dedup)
            times["plain" if dedup == "off" else "chunked"].append(time.perf_counter() - started)
            shutil.rmtree(src)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def pull(reg: Registries, base: str, work: Path, *, size: int, runs: int) -> dict[str, float]:
    src = _random_dir(work / "pull-src", size)
    refs = {}
    for dedup in ("off", "chunks"):
        refs["plain" if dedup == "off" else "chunked"] = f"{_repo(base)}:v1"
        _push(reg, refs["plain" if dedup == "off" else "chunked"], src, dedup=dedup)
    want = hashlib.sha256((src / "model.bin").read_bytes()).hexdigest() if size <= 64 * MiB else None
    shutil.rmtree(src)
    times: dict[str, list[float]] = {"plain": [], "chunked": []}
    for i in range(runs):
        for name in ("plain", "chunked") if i % 2 == 0 else ("chunked", "plain"):
            dest = work / f"pulled-{name}-{i}"
            started = time.perf_counter()
            pulling.pull(reg, ref=reg.ref(refs[name]), dest=dest)
            times[name].append(time.perf_counter() - started)
            if want is not None:
                assert hashlib.sha256((dest / "model.bin").read_bytes()).hexdigest() == want
            shutil.rmtree(dest)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def release(reg: Registries, base: str, work: Path, *, size: int) -> dict[str, float]:
    """What release create does per file: assemble a plain checkpoint's blob in place, or
    rebuild a chunked checkpoint's file (verified pull) and push it as one blob."""
    src = work / "release-src"
    ft = FineTune(tensors=8, tensor_size=size // 8)
    ft.checkpoint(src)
    out = {}
    plain, chunked = _repo(base), _repo(base)
    p = _push(reg, f"{plain}:step-1", src, dedup="off")
    c = _push(reg, f"{chunked}:step-1", src, dedup="chunks")
    found = store.resolve(reg, ref=reg.ref(f"{plain}:step-1"))
    files = [(f"{layer.annotations['org.cncf.model.filepath']}", layer) for layer in found.parsed.layers]
    started = time.perf_counter()
    store.assemble(reg, src=found.ref, files=files, ref=reg.ref(f"{plain}-model:v1"), kind="model", created="")
    out["plain (assemble)"] = time.perf_counter() - started
    started = time.perf_counter()
    rebuilt = work / "release-rebuilt"
    pulling.pull(reg, ref=reg.ref(f"{chunked}:step-1@{c.digest}"), dest=rebuilt)
    store.push(reg, source=rebuilt, ref=reg.ref(f"{chunked}-model:v1"), kind="model")
    out["chunked (rebuild)"] = time.perf_counter() - started
    assert p.digest != c.digest
    shutil.rmtree(src)
    shutil.rmtree(rebuilt)
    return out


def memory(dist: DistributionRegistry, work: Path, *, sizes: list[int]) -> list[dict[str, float]]:
    """Peak RSS of `trainops push --dedup chunks` of a file with a 1 MiB change against its
    parent (new chunks packed, the rest read from the parent's pack) and of its pull (read
    from both packs), each its own process, at each size: flat if the size does not show."""
    from bench.growth import run

    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRAINOPS_INSECURE_REGISTRIES": dist.host}
    cli = [sys.executable, "-m", "trainops.cli.main"]
    out = []
    for mib in sizes:
        repo = f"{dist.host}/dedup/mem{mib}-{uuid.uuid4().hex[:6]}"
        a = _random_dir(work / f"mem-a-{mib}", mib * MiB)
        run([*cli, "push", str(a), f"oci://{repo}:step-1", "--dedup", "chunks", "-o", "json"], env)
        with (a / "model.bin").open("r+b") as fh:
            fh.seek(mib * MiB // 2 + 12345)
            fh.write(os.urandom(MiB))
        parent = ["--parent", f"oci://{repo}:step-1"]
        push = run([*cli, "push", str(a), f"oci://{repo}:step-2", "--dedup", "chunks", *parent, "-o", "json"], env)
        pull = run([*cli, "pull", f"oci://{repo}:step-2", str(work / f"mem-out-{mib}"), "-o", "json"], env)
        out.append({"mib": mib, "push_s": push[0], "push_mb": push[1], "pull_s": pull[0], "pull_mb": pull[1]})
        shutil.rmtree(a)
        shutil.rmtree(work / f"mem-out-{mib}")
    return out


def chunkers(size: int) -> dict[str, float]:
    """MB/s of each chunker over random bytes in memory (cuts only, no hashing)."""
    data = os.urandom(size)
    small = data[: min(size, 2 * MiB)]  # the pure-Python ones are slow
    out = {}

    def measure(name: str, cut: object, buf: bytes) -> None:
        started = time.perf_counter()
        count = sum(1 for _ in cut(buf))  # type: ignore[operator]
        out[name] = round(len(buf) / (time.perf_counter() - started) / 1e6, 1)
        assert count > 0

    from pyfastcdc.cy import FastCDC as Cy
    from pyfastcdc.py import FastCDC as Py

    bounds = {"min_size": chunker.MIN_CHUNK, "max_size": chunker.MAX_CHUNK}
    measure("pyfastcdc (Cython)", Cy(chunker.AVG_CHUNK - chunker.MIN_CHUNK, **bounds).cut_buf, data)
    measure("pyfastcdc (pure Python)", Py(chunker.AVG_CHUNK - chunker.MIN_CHUNK, **bounds).cut_buf, small)
    try:
        from fastcdc.fastcdc_cy import fastcdc_cy
        from fastcdc.fastcdc_py import fastcdc_py
    except ImportError:
        pass
    else:
        args = (chunker.MIN_CHUNK, chunker.AVG_CHUNK, chunker.MAX_CHUNK)
        measure("fastcdc (Cython)", lambda b: fastcdc_cy(b, *args), data)
        measure("fastcdc (pure Python)", lambda b: fastcdc_py(b, *args), small)
    started = time.perf_counter()
    hashlib.sha256(data).digest()
    out["sha256 (reference)"] = round(len(data) / (time.perf_counter() - started) / 1e6, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 MiB everywhere (CI)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per side (median)")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/dedup.json")
    args = parser.parse_args()
    load = docresult.Load()
    quick = args.quick
    sizes = {
        "series": 16 if quick else 256,
        "change": 16 if quick else 256,
        "push_new": 16 if quick else 256,
        "pull": 16 if quick else 1024,
        "release": 16 if quick else 256,
        "s3": 8 if quick else 64,
    }
    runs = args.runs or (1 if quick else 3)
    res = Results(sizes_mib=sizes)
    with tempfile.TemporaryDirectory(prefix="trainops-dedup-") as tmp:
        work = Path(tmp)
        os.environ["TRAINOPS_CACHE_DIR"] = str(work / "cache")
        dist = DistributionRegistry(work / "distribution")
        moto = MotoS3(work / "moto")
        dist.start()
        try:
            base = f"oci://{dist.host}/dedup"
            with Registries(default_registry=base, insecure_registries=(dist.host,)) as reg:
                res.chunkers = chunkers(16 * MiB if quick else 128 * MiB)
                res.series = series(reg, base, work, total=sizes["series"] * MiB, steps=3, pulls=res.series_pull)
                res.change_share = change(reg, base, work, size=sizes["change"] * MiB)
                res.push_new = push_new(reg, base, work, size=sizes["push_new"] * MiB, runs=runs)
                res.pull = pull(reg, base, work, size=sizes["pull"] * MiB, runs=runs)
                res.release = release(reg, base, work, size=sizes["release"] * MiB)
            res.memory = memory(dist, work, sizes=[8, 32] if quick else [256, 1024])
            moto.start()
            for key, value in moto.env.items():
                os.environ[key] = value
            bucket = moto.new_bucket(f"dedup-{uuid.uuid4().hex[:8]}")
            s3 = f"s3://{bucket}/dedup"
            with Registries(default_registry=s3) as reg:
                started = time.perf_counter()
                res.s3_series = series(reg, s3, work, total=sizes["s3"] * MiB, steps=3)
                res.s3_seconds["series (3 modes x 3 checkpoints)"] = round(time.perf_counter() - started, 2)
        finally:
            dist.stop()
            moto.stop()
    report(res)
    if quick:
        return
    out = ROOT / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    summary = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    (out / "dedup.json").write_text(json.dumps({**summary, **asdict(res)}, indent=2))
    if args.doc:
        write_doc(res, runs, load)


def _shares(series: dict[str, list[float]]) -> str:
    return "; ".join(
        f"{name}: {', '.join(f'{x:.1%}' for x in shares)}" for name, shares in series.items() if name != "plain"
    )


def write_doc(res: Results, runs: int, load: docresult.Load) -> None:
    """The committed results (docs/operations/results/dedup.json) the performance page shows."""
    s = res.sizes_mib
    rows = [
        [
            f"fine-tune series, {s['series']} MiB, half the tensors frozen: share sent per new checkpoint",
            "100 %",
            _shares(res.series),
            "≤ 55 %",
        ],
        [f"the same series on s3:// (moto, {s['s3']} MiB)", "100 %", _shares(res.s3_series), "≤ 55 %"],
        [
            f"a 1 MiB change inside a {s['change']} MiB file: share re-sent",
            "100 %",
            f"{res.change_share.get('chunked', 0):.2%}",
            "≤ 2 %",
        ],
    ]
    for what, key, size, target in (
        ("nothing shared: push of new random data", "push_new", "push_new", "≤ 1.10"),
        ("pull of it, every byte and chunk verified", "pull", "pull", "≤ 1.25"),
        ("pull of the series' last checkpoint, read from the packs", "series_pull", "series", "—"),
    ):
        times = getattr(res, key)
        plain, chunked = times["plain"], times["chunked"]
        rows.append(
            [
                f"{what}, {s[size]} MiB (median of {runs})",
                f"{plain:.2f} s",
                f"{chunked:.2f} s",
                f"ratio {chunked / plain:.2f}; target {target}",
            ]
        )
    memory = ", ".join(
        f"{m['mib']:.0f} MiB: push {m['push_mb']:.0f} MB, pull {m['pull_mb']:.0f} MB" for m in res.memory
    )
    rows.append(["peak RSS, chunked push of a 1 MiB change against its parent / its pull", "—", memory, "flat"])
    release = ", ".join(f"{k} {v:.2f} s" for k, v in res.release.items())
    rows.append([f"`release create`'s per-file blobs, {s['release']} MiB checkpoint", "—", release, "—"])
    docresult.write(
        docresult.default_path("dedup"),
        benchmark="dedup",
        title="Chunked checkpoints against plain pushes (Distribution, and moto for s3://)",
        load=load,
        columns=["benchmark", "plain", "chunked", "target"],
        rows=rows,
    )


def report(res: Results) -> None:
    buf = io.StringIO()
    s = res.sizes_mib
    buf.write(f"fine-tune series ({s['series']} MiB, half the tensors frozen): share sent per new checkpoint\n")
    for name, shares in res.series.items():
        buf.write(f"  {name:<20} {' '.join(f'{x:6.1%}' for x in shares)}\n")
    buf.write(f"1 MiB change in a {s['change']} MiB file: share re-sent\n")
    for name, share in res.change_share.items():
        buf.write(f"  {name:<20} {share:6.2%}\n")
    p, c = res.push_new["plain"], res.push_new["chunked"]
    buf.write(f"nothing shared ({s['push_new']} MiB): push plain {p:.2f}s chunked {c:.2f}s ratio {c / p:.2f}\n")
    p, c = res.pull["plain"], res.pull["chunked"]
    buf.write(f"pull ({s['pull']} MiB): plain {p:.2f}s chunked {c:.2f}s ratio {c / p:.2f}\n")
    p, c = res.series_pull["plain"], res.series_pull["chunked"]
    buf.write(f"pull of the series' last checkpoint ({s['series']} MiB, from packs): plain {p:.2f}s chunked {c:.2f}s")
    buf.write(f" ratio {c / p:.2f}\n")
    buf.write("peak RSS, chunked push of a 1 MiB change against its parent / its pull:\n")
    for m in res.memory:
        buf.write(f"  {m['mib']:5.0f} MiB  push {m['push_s']:6.2f}s {m['push_mb']:5.0f} MB")
        buf.write(f"  pull {m['pull_s']:6.2f}s {m['pull_mb']:5.0f} MB\n")
    buf.write(f"release create per-file blobs ({s['release']} MiB): ")
    buf.write(", ".join(f"{k} {v:.2f}s" for k, v in res.release.items()) + "\n")
    buf.write("chunkers (MB/s, in memory): " + ", ".join(f"{k} {v}" for k, v in res.chunkers.items()) + "\n")
    buf.write(f"s3:// (moto) series ({s['s3']} MiB): share sent per new checkpoint\n")
    for name, shares in res.s3_series.items():
        buf.write(f"  {name:<20} {' '.join(f'{x:6.1%}' for x in shares)}\n")
    print(buf.getvalue(), end="")


if __name__ == "__main__":
    main()
