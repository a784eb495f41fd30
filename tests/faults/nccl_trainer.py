"""A trainer that writes NCCL's own signals as NCCL and PyTorch write them, for the tests of
`train run --local` reading them (no GPU here: the formats are the real ones).

    python nccl_trainer.py CUE RANKS STEPS

It trains STEPS steps of 50 ms (a metrics line each, no rank: the ranks are seen through NCCL
alone), each rank doing two AllReduce collectives a step, and rewrites every step the NCCL
Inspector's Prometheus file of each rank's GPU,
`$INSPECTOR_DIR/nccl_inspector_metrics_GPU-<uuid>.prom` (NCCL_INSPECTOR_PROM_DUMP=1: the last
collective of each communicator, three metrics, the plugin's labels). It resumes from the
newest checkpoint (`step-NNNNNN/`, every 20 steps) under $TRAINOPS_CKPT_DIR. The file CUE, when
it exists, holds `KIND ARG`:

- `slow RANK`: that rank completes one collective a step to its peers' two, at half their bus
  bandwidth (a throttled GPU, a flapping link);
- `hang STEP`: at STEP the CUE is removed, each rank writes its flight-recorder dump
  `$FR_PREFIX<rank>` (a pickle, as TORCH_NCCL_DUMP_ON_TIMEOUT does): every rank but the last has
  started an AllReduce the last one never entered; then the trainer stops, writing nothing,
  until it is killed.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

HOST = socket.gethostname()


def _inspector(directory: Path, rank: int, ranks: int, sn: int, bus: float) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = (
        f'comm_id="0x7f8c496ae9f661",hostname="{HOST}",rank="{rank}",slurm_job="unknown",slurm_job_id="unknown",'
        f'nranks="{ranks}",n_nodes="1",gpu_device_id="GPU{rank}",collective="AllReduce",coll_sn="{sn}",'
        f'timestamp="{stamp}",message_size="2.00GB"'
    )
    text = (
        f"nccl_algorithm_bandwidth_gbs{{{labels}}} {bus * 0.57:.6g}\n"
        f"nccl_bus_bandwidth_gbs{{{labels}}} {bus:.6g}\n"
        f"nccl_collective_exec_time_microseconds{{{labels}}} {2 * 1024**3 / (bus * 1e3):.6g}\n"
    )
    target = directory / f"nccl_inspector_metrics_GPU-0000000{rank}-aaaa-bbbb-cccc-dddddddddddd.prom"
    temp = target.with_suffix(".tmp")
    temp.write_text(text)
    temp.rename(target)  # rewritten whole, as each dump is a snapshot


def _entry(seq: int, state: str) -> dict[str, object]:
    return {
        "frames": [{"name": "train_step", "filename": "train.py", "line": 42}],
        "record_id": seq - 1,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": "nccl:all_reduce",
        "time_created_ns": time.time_ns(),
        "input_sizes": [[1024, 1024]],
        "input_dtypes": ["Float"],
        "output_sizes": [[1024, 1024]],
        "output_dtypes": ["Float"],
        "state": state,
        "time_discovered_started_ns": time.time_ns() if state != "scheduled" else None,
        "time_discovered_completed_ns": time.time_ns() if state == "completed" else None,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": False,
    }


def _flight_recorder(prefix: str, ranks: int, done: int) -> None:
    """Every rank but the last started collective done+1; the last never entered it."""
    for rank in range(ranks):  # every rank dumps (the timed-out one tells its peers through the store)
        entries = [_entry(seq, "completed") for seq in range(1, done + 1)]
        entries += [_entry(done + 1, "started")] if rank < ranks - 1 else []
        dump = {
            "version": "2.4",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": done + 1,
                    "last_started_collective": done + 1,
                    "last_completed_collective": done,
                }
            },
            "entries": entries,
        }
        Path(f"{prefix}{rank}").write_bytes(pickle.dumps(dump))


def main() -> None:
    cue, ranks, total = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    directory = Path(os.environ["TRAINOPS_CKPT_DIR"])
    inspector = Path(os.environ["INSPECTOR_DIR"])
    inspector.mkdir(parents=True, exist_ok=True)
    start = max((int(p.name[5:]) for p in directory.glob("step-*")), default=0)
    kind, arg = cue.read_text().split() if cue.exists() else ("", "-1")
    slow = int(arg) if kind == "slow" else -1
    done = dict.fromkeys(range(ranks), 2 * start)
    for step in range(start + 1, total + 1):
        if kind == "hang" and step == int(arg):
            cue.unlink()
            _flight_recorder(os.environ["FR_PREFIX"], ranks, done[0])
            threading.Event().wait()
        time.sleep(0.05)
        for rank in range(ranks):
            done[rank] += 1 if rank == slow else 2
            _inspector(inspector, rank, ranks, done[rank], 240.0 if rank == slow else 480.0)
        print(json.dumps({"step": step, "train_loss": round(1.0 / step, 6)}), flush=True)
        if step % 20 == 0:
            temp = directory / f".tmp-step-{step:06d}"
            temp.mkdir(parents=True, exist_ok=True)
            (temp / "state.json").write_text(json.dumps({"step": step}))
            temp.rename(directory / f"step-{step:06d}")


if __name__ == "__main__":
    main()
