"""Restoring a sharded checkpoint on every rank at once: each rank its own shards, against
every rank pulling everything, against the disk's floor (a plain copy), in one run.

One Distribution registry (the one the tests use, trainops_testing.services) on loopback
holds a Megatron-style checkpoint (`mp_rank_XX/` per rank, plus a config and a tokenizer
every rank reads) pushed by `trainops ckpt watch --once`. Then N rank processes start
together, as after a restart, each into its own directory (its node's disk) with its own
digest cache:

- rank-sharded: `trainops ckpt pull --latest REPO DIR --rank R --world-size N`;
- every rank pulls everything: the same without --rank;
- again on the same nodes: rank-sharded into the directories it filled (the node-local
  copy's digests match: nothing is downloaded);
- the disk's floor: each rank `cp -r` of its own shard and the shared files from the
  checkpoint on this disk (no network, no verification).

Figures: wall time from the start of the N processes to the last one done, the slowest
rank, bytes received (trainops' own count, summed), and the largest peak RSS of a rank
(GNU time). The registry, the N ranks and the disk share this machine, so read the ratios;
the load average is printed with them.

    python bench/restore.py            # 16 ranks, 4 GiB checkpoint
    python bench/restore.py --quick    # 4 ranks, 8 MiB (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.services import DistributionRegistry  # noqa: E402

PY = sys.executable
MIB = 1024 * 1024


@dataclass
class Case:
    what: str
    seconds: float  # start of the N ranks to the last one done
    slowest: float
    bytes_received: int
    peak_rss_mib: float


def make_checkpoint(directory: Path, ranks: int, total: int) -> Path:
    """iter_0000100/mp_rank_XX/model_optim_rng.pt (total / ranks bytes each), a config and a
    tokenizer; Megatron's tracker beside it."""
    path = directory / "iter_0000100"
    block = os.urandom(MIB)
    for rank in range(ranks):
        shard = path / f"mp_rank_{rank:02d}" / "model_optim_rng.pt"
        shard.parent.mkdir(parents=True)
        with shard.open("wb") as fh:
            for i in range(max(1, total // ranks // MIB)):
                fh.write(rank.to_bytes(2, "big") + i.to_bytes(4, "big") + block[6:])  # no two blocks alike
    (path / "config.json").write_text(json.dumps({"tensor_model_parallel_size": ranks}))
    (path / "tokenizer.model").write_bytes(os.urandom(512 * 1024))
    (directory / "latest_checkpointed_iteration.txt").write_text("100")
    return path


def trainops(*args: str) -> list[str]:
    return [PY, "-m", "trainops.cli.main", *args]


def run_ranks(what: str, commands: list[list[str]], envs: list[dict[str, str]]) -> Case:
    """Start every rank's command at once; time each and the whole."""
    started = time.perf_counter()
    procs = [
        (
            subprocess.Popen(
                ["/usr/bin/time", "-f", "%M", *cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            ),
            time.perf_counter(),
        )
        for cmd, env in zip(commands, envs, strict=True)
    ]
    slowest, received, peak = 0.0, 0, 0.0
    for proc, began in procs:
        out, err = proc.communicate()
        slowest = max(slowest, time.perf_counter() - began)
        if proc.returncode != 0:
            raise SystemExit(f"{what}: {' '.join(commands[0][:6])}… failed ({proc.returncode}):\n{err.decode()}")
        peak = max(peak, int(err.decode().strip().splitlines()[-1]) / 1024)
        if out.strip().startswith(b"{"):
            received += int(json.loads(out).get("bytesReceived", 0))
    return Case(what, round(time.perf_counter() - started, 3), round(slowest, 3), received, round(peak, 1))


def bench(work: Path, ranks: int, total: int) -> list[Case]:
    source = work / "train"
    ckpt = make_checkpoint(source, ranks, total)
    reg = DistributionRegistry(work / "registry-data")
    reg.start()
    try:
        repo = f"oci://{reg.host}/bench/ckpt"
        base = {**os.environ, "PYTHONPATH": str(ROOT), "TRAINOPS_INSECURE_REGISTRIES": reg.host}
        push = trainops(
            "ckpt",
            "watch",
            str(source),
            "--repository",
            repo,
            "--run-id",
            "bench",
            "--layout",
            "megatron",
            "--once",
            "--insecure",
        )
        subprocess.run(
            push, env={**base, "TRAINOPS_CACHE_DIR": str(work / "cache-push")}, check=True, capture_output=True
        )
        envs = [{**base, "TRAINOPS_CACHE_DIR": str(work / f"cache-{r}")} for r in range(ranks)]

        def pull(case: str, rank: int, sharded: bool) -> list[str]:
            extra = ["--rank", str(rank), "--world-size", str(ranks)] if sharded else []
            return trainops(
                "ckpt",
                "pull",
                "--latest",
                repo,
                str(work / case / f"node-{rank}"),
                "--layout",
                "megatron",
                "--insecure",
                "-o",
                "json",
                *extra,
            )

        cases = [
            run_ranks(
                "rank-sharded: each rank its shard and the shared files",
                [pull("sharded", r, True) for r in range(ranks)],
                envs,
            ),
            run_ranks("every rank pulls everything", [pull("all", r, False) for r in range(ranks)], envs),
            run_ranks(
                "rank-sharded again on the same nodes (node-local copy reused)",
                [pull("sharded", r, True) for r in range(ranks)],
                envs,
            ),
        ]
        floor = []
        for r in range(ranks):
            dest = work / "floor" / f"node-{r}" / ckpt.name
            dest.mkdir(parents=True)
            mine = [str(ckpt / f"mp_rank_{r:02d}"), str(ckpt / "config.json"), str(ckpt / "tokenizer.model")]
            floor.append(["cp", "-r", *mine, str(dest)])
        cases.append(run_ranks("the disk's floor: cp -r of each rank's share", floor, envs))
        return cases
    finally:
        reg.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 ranks, 8 MiB (CI)")
    parser.add_argument("--ranks", type=int, help="ranks (default 16; 4 with --quick)")
    parser.add_argument("--size-mib", type=int, help="checkpoint size (default 4096; 8 with --quick)")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/restore.json")
    args = parser.parse_args()
    ranks = args.ranks or (4 if args.quick else 16)
    total = (args.size_mib or (8 if args.quick else 4096)) * MIB
    load = docresult.Load()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="restore-") as tmp:
        cases = bench(Path(tmp), ranks, total)
    load.end = os.getloadavg()[0]
    print(f"restore: {ranks} ranks, a {total // MIB} MiB checkpoint, one registry; {load.text()}")
    print(f"  uptime at the start: {uptime}")
    for c in cases:
        print(
            f"  {c.what}: {c.seconds:.2f} s (slowest rank {c.slowest:.2f} s), "
            f"{c.bytes_received / MIB:.1f} MiB received, peak RSS {c.peak_rss_mib:.0f} MiB"
        )
    if not args.quick:
        out = ROOT / "bench" / "results" / "restore.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps(
                {"ranks": ranks, "bytes": total, "load": load.text(), "cases": [asdict(c) for c in cases]}, indent=2
            )
        )
    if args.doc:
        docresult.write(
            docresult.default_path("restore"),
            benchmark="restore",
            title=f"{ranks} ranks restoring a {total // MIB} MiB sharded checkpoint from one registry",
            load=load,
            columns=["restore", "all ranks done", "slowest rank", "received", "peak RSS of a rank"],
            rows=[
                [
                    c.what,
                    f"{c.seconds:.2f} s",
                    f"{c.slowest:.2f} s",
                    f"{c.bytes_received / MIB:.1f} MiB" if "floor" not in c.what else "—",
                    f"{c.peak_rss_mib:.0f} MiB",
                ]
                for c in cases
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
