"""Kill matrix: SIGKILL trainops at random moments of its operations, then run it again.

For each backend (file://, oci:// on Distribution, s3:// on moto) and each operation
(push, pull, `ckpt watch --once`, and `train submit` to a bare GitOps repo), a trial starts
the real CLI as its own process, SIGKILLs it at a random moment within the time an
uninterrupted run takes, looks at what a reader would see, then runs the same command again
to completion. A further matrix restarts the registry in the middle of pushes and pulls.

Figures per row:
- trials;
- completed after re-run (must equal trials);
- partial artifacts ever visible (must be 0): a tag that resolves to an artifact that does
  not pull whole and verified, a file in a pull's destination that is not the pushed one, a
  GitOps commit with only part of its tree;
- bytes re-sent: what the re-run sent, as a share of the artifact (push only; resume and
  blob dedup keep it below 100 %).

    python bench/reliability.py            # 8 trials per cell, 64 MiB artifacts
    python bench/reliability.py --quick    # 1 trial per cell, 2 MiB: about a minute
    python bench/reliability.py --doc      # also write docs/operations/results/reliability.json

A row with partial artifacts or a trial that never completed makes the script exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from trainops_testing.services import DistributionRegistry, MotoS3, git_env  # noqa: E402

PY = sys.executable
MiB = 1024 * 1024


@dataclass
class Row:
    backend: str
    operation: str
    trials: int = 0
    completed: int = 0
    partial_visible: int = 0
    bytes_total: int = 0
    bytes_resent: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def resent_share(self) -> float | None:
        return self.bytes_resent / self.bytes_total if self.bytes_total else None

    @property
    def ok(self) -> bool:
        return self.completed == self.trials and self.partial_visible == 0


@dataclass
class Env:
    work: Path
    env: dict[str, str]
    registry: str  # the registry URL of the backend under test
    restart: Callable[[], None] | None = None


def cli(args: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "trainops.cli.main", *args], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )


def killed_at(args: list[str], env: dict[str, str], delay: float, cwd: Path | None = None) -> int | None:
    """Start the CLI, SIGKILL it after delay seconds; its exit code if it finished first."""
    proc = subprocess.Popen(
        [PY, "-m", "trainops.cli.main", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def fresh(env: Env, name: str) -> Path:
    """A path under the work directory that no trial has used."""
    return env.work / f"{name}-{uuid.uuid4().hex[:8]}"


def make_tree(root: Path, files: int, size: int) -> Path:
    root.mkdir(parents=True)
    for i in range(files):
        (root / f"shard-{i:02d}.bin").write_bytes(os.urandom(size))
    return root


def same_tree(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    if not b.is_dir() or sorted(p.name for p in b.iterdir() if not p.name.startswith(".")) != names:
        return False
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def timed(args: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    started = time.perf_counter()
    done = cli(args, env, cwd)
    if done.returncode != 0:
        raise SystemExit(f"trainops {' '.join(args[:3])} failed: {done.stderr.strip()}")
    return time.perf_counter() - started


def visible_and_whole(ref: str, source: Path, env: Env) -> bool | None:
    """None if the tag is not visible; else whether it pulls whole and verified."""
    if cli(["registry", "show", ref, "-o", "json"], env.env).returncode != 0:
        return None
    out = env.work / f"check-{uuid.uuid4().hex[:8]}"
    done = cli(["pull", ref, str(out)], env.env)
    whole = done.returncode == 0 and same_tree(source, out)
    shutil.rmtree(out, ignore_errors=True)
    return whole


def push_trials(env: Env, source: Path, trials: int, rng: random.Random, *, chunked: bool = False) -> Row:
    row = Row(env.registry.split(":")[0], "push (chunked)" if chunked else "push")
    flags = ["--dedup", "chunks"] if chunked else []
    repo = f"{env.registry}/kill-push-{uuid.uuid4().hex[:6]}"
    full = timed(["push", str(source), f"{repo}:warm", "-o", "json", *flags], env.env)
    for i in range(trials):
        data = fresh(env, "src")
        shutil.copytree(source, data)
        (data / "shard-00.bin").write_bytes(os.urandom((data / "shard-00.bin").stat().st_size))  # new content
        ref = f"{repo}:t{i}"
        row.trials += 1
        killed_at(["push", str(data), ref, *flags], env.env, rng.uniform(0.05, full))
        if visible_and_whole(ref, data, env) is False:
            row.partial_visible += 1
        again = cli(["push", str(data), ref, "-o", "json", *flags], env.env)
        if again.returncode == 0 and visible_and_whole(ref, data, env):
            row.completed += 1
            report = json.loads(again.stdout)
            row.bytes_total += report["bytesTotal"]
            row.bytes_resent += report["bytesSent"]
        else:
            row.notes.append(f"trial {i}: re-run failed: {again.stderr.strip()[:200]}")
        shutil.rmtree(data)
    return row


def pull_trials(env: Env, source: Path, trials: int, rng: random.Random, *, chunked: bool = False) -> Row:
    row = Row(env.registry.split(":")[0], "pull (chunked)" if chunked else "pull")
    ref = f"{env.registry}/kill-pull-{uuid.uuid4().hex[:6]}:v1"
    timed(["push", str(source), ref, *(["--dedup", "chunks"] if chunked else [])], env.env)
    full = timed(["pull", ref, str(fresh(env, "warm-pull"))], env.env)
    for _ in range(trials):
        dest = fresh(env, "pull") / "dest"
        row.trials += 1
        killed_at(["pull", ref, str(dest)], env.env, rng.uniform(0.05, full))
        # Only verified files may ever appear in the destination.
        if dest.exists() and any(
            not (source / p.name).is_file() or (source / p.name).read_bytes() != p.read_bytes()
            for p in dest.iterdir()
            if not p.name.startswith(".")
        ):
            row.partial_visible += 1
        if cli(["pull", ref, str(dest)], env.env).returncode == 0 and same_tree(source, dest):
            row.completed += 1
        shutil.rmtree(dest.parent)
    return row


def watch_trials(env: Env, source: Path, trials: int, rng: random.Random) -> Row:
    """`ckpt watch --once` over a run directory of three complete step-N checkpoints."""
    row = Row(env.registry.split(":")[0], "ckpt watch")

    def run_dir(name: str) -> Path:
        root = fresh(env, name)
        for step in (100, 200, 300):
            shutil.copytree(source, root / f"step-{step}")
            (root / f"step-{step}" / "shard-00.bin").write_bytes(os.urandom(1024))
        return root

    def args(root: Path, repo: str, run: str) -> list[str]:
        return ["ckpt", "watch", str(root), "--once", "--repository", repo, "--run-id", run, "--layout", "trainops"]

    full = timed(args(run_dir("watch-warm"), f"{env.registry}/kill-watch-warm", "warm"), env.env)
    for i in range(trials):
        root = run_dir(f"ckpts-{i}")
        repo = f"{env.registry}/kill-watch-{uuid.uuid4().hex[:6]}"
        row.trials += 1
        killed_at(args(root, repo, f"r{i}"), env.env, rng.uniform(0.05, full))
        for step in (100, 200, 300):
            if visible_and_whole(f"{repo}:step-{step}", root / f"step-{step}", env) is False:
                row.partial_visible += 1
        done = cli(args(root, repo, f"r{i}"), env.env)
        whole = [visible_and_whole(f"{repo}:step-{s}", root / f"step-{s}", env) for s in (100, 200, 300)]
        if done.returncode == 0 and all(whole):
            row.completed += 1
        else:
            row.notes.append(f"trial {i}: {done.stderr.strip()[:200]}")
        shutil.rmtree(root)
    return row


def submit_trials(env: Env, trials: int, rng: random.Random) -> Row:
    """`train submit` of the example to its bare GitOps repo: a commit lands whole or not at all."""
    row = Row("git", "train submit")
    project = env.work / "project"
    shutil.copytree(ROOT / "examples" / "tiny-llm", project, ignore=shutil.ignore_patterns(".trainops", "checkpoints"))
    remote = project / ".trainops" / "gitops.git"  # spec.gitops.repo of the example
    image = "registry.example.com/tiny-llm/image@sha256:" + "0" * 64
    base = ["train", "submit", "--image", image]
    full = timed([*base, "--run-id", "warm"], env.env, project)
    for i in range(trials):
        row.trials += 1
        killed_at([*base, "--run-id", f"kill-{i}"], env.env, rng.uniform(0.05, full), project)
        if not _gitops_whole(remote):
            row.partial_visible += 1
        done = cli([*base, "--run-id", f"kill-{i}"], env.env, project)
        log = subprocess.run(
            ["git", "--git-dir", str(remote), "log", "--format=%B", "main"], capture_output=True, text=True, check=False
        ).stdout
        if done.returncode == 0 and log.count(f"Trainops-Run: kill-{i}") == 1 and _gitops_whole(remote):
            row.completed += 1
        else:
            row.notes.append(f"trial {i}: {done.stderr.strip()[:200]}")
    return row


def _gitops_whole(remote: Path) -> bool:
    """The branch's tree is readable and every YAML file in it parses whole."""
    import yaml

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "--git-dir", str(remote), *args], capture_output=True, text=True, check=False)

    files = git("ls-tree", "-r", "--name-only", "main")
    if files.returncode != 0:
        return not remote.exists() or git("rev-parse", "--verify", "-q", "main").returncode != 0
    for name in files.stdout.split():
        if name.endswith((".yaml", ".yml")):
            try:
                list(yaml.safe_load_all(git("show", f"main:{name}").stdout))
            except yaml.YAMLError:
                return False
    return True


def restart_trials(env: Env, source: Path, trials: int, rng: random.Random) -> Row:
    """Restart the registry in the middle of a push: the push finishes (retries) or fails cleanly."""
    assert env.restart is not None
    row = Row(env.registry.split(":")[0], "push across a registry restart")
    repo = f"{env.registry}/restart-{uuid.uuid4().hex[:6]}"
    full = timed(["push", str(source), f"{repo}:warm"], env.env)
    for i in range(trials):
        data = fresh(env, "rsrc")
        shutil.copytree(source, data)
        (data / "shard-00.bin").write_bytes(os.urandom((data / "shard-00.bin").stat().st_size))
        ref = f"{repo}:t{i}"
        proc = subprocess.Popen(
            [PY, "-m", "trainops.cli.main", "push", str(data), ref],
            env=env.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(0.05, full))  # the moment of the restart is the variable under test
        env.restart()
        _, err = proc.communicate(timeout=600)
        row.trials += 1
        if visible_and_whole(ref, data, env) is False:
            row.partial_visible += 1
        if proc.returncode != 0:
            row.notes.append(f"trial {i}: push failed across the restart ({proc.returncode}): {err.strip()[-160:]}")
            if cli(["push", str(data), ref], env.env).returncode != 0:
                continue
        if visible_and_whole(ref, data, env):
            row.completed += 1
        shutil.rmtree(data)
    return row


def run_matrix(*, trials: int, files: int, size: int, seed: int, backends: list[str]) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="trainops-kill-") as tmp:
        work = Path(tmp)
        source = make_tree(work / "source", files, size)
        # chunked cells: files of at least 2 MiB (smaller than 1 MiB stay plain layers)
        big = make_tree(work / "chunked", files, max(size, 2 * MiB))
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        base_env["PYTHONPATH"] = str(ROOT) + os.pathsep + base_env.get("PYTHONPATH", "")
        registry = DistributionRegistry(work / "distribution")
        s3 = MotoS3(work / "moto")
        try:
            for backend in backends:
                env = _backend_env(backend, work, base_env, registry, s3)
                rows += [
                    push_trials(env, source, trials, rng),
                    pull_trials(env, source, trials, rng),
                    watch_trials(env, source, max(1, trials // 2), rng),
                    push_trials(env, big, trials, rng, chunked=True),
                    pull_trials(env, big, trials, rng, chunked=True),
                ]
                if backend == "oci":
                    rows.append(restart_trials(env, source, trials, rng))
            rows.append(submit_trials(Env(work, git_env(base_env), "git"), trials, rng))
        finally:
            registry.stop()
            s3.stop()
    return rows


def _backend_env(backend: str, work: Path, base: dict[str, str], registry: DistributionRegistry, s3: MotoS3) -> Env:
    if backend == "file":
        return Env(work, dict(base), f"file://{work / 'layout'}")
    if backend == "oci":
        if registry.proc is None:
            registry.start()
        env = {**base, "TRAINOPS_INSECURE_REGISTRIES": registry.host}
        return Env(work, env, f"oci://{registry.host}/kill", restart=registry.restart)
    if s3.proc is None:
        s3.start()
    bucket = s3.new_bucket(f"kill-{uuid.uuid4().hex[:8]}")
    return Env(work, {**base, **s3.env}, f"s3://{bucket}/kill")


COLUMNS = ("backend", "operation", "trials", "completed after re-run", "partial artifacts visible", "bytes re-sent")


def cells(rows: list[Row]) -> list[list[str]]:
    """Each row as the table shows it."""
    return [
        [
            r.backend,
            r.operation,
            str(r.trials),
            str(r.completed),
            str(r.partial_visible),
            "—" if r.resent_share is None else f"{r.resent_share:.0%}",
        ]
        for r in rows
    ]


def main() -> int:
    # here, not at the top: bench/harness is on the path only when this file runs as a script,
    # and tests/reliability/test_kill_matrix.py imports this module for run_matrix
    from harness import docresult

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 trial per cell, 2 MiB artifacts (about a minute)")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--size-mib", type=int, default=64, help="artifact size (4 files)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--backend", action="append", choices=["file", "oci", "s3"], default=None)
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/reliability.json")
    args = parser.parse_args()
    trials, size_mib = (1, 2) if args.quick else (args.trials, args.size_mib)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    backends = args.backend or ["file", "oci", "s3"]
    load = docresult.Load()
    started = time.perf_counter()
    rows = run_matrix(trials=trials, files=4, size=size_mib * MiB // 4, seed=seed, backends=backends)
    took = time.perf_counter() - started
    print(docresult.table(COLUMNS, cells(rows)))
    for r in rows:
        for note in r.notes:
            print(f"note: {r.backend} {r.operation}: {note}")
    print(f"seed {seed}, {trials} trials per cell, {size_mib} MiB artifacts, {took:.0f} s")
    if not args.quick:  # a quick run checks that the benchmark runs: it writes no results
        results = ROOT / "bench" / "results"
        results.mkdir(exist_ok=True)
        figures = {"seed": seed, "trials": trials, "sizeMiB": size_mib, "rows": [asdict(r) for r in rows]}
        (results / "reliability.json").write_text(json.dumps(figures, indent=2))
    if args.doc:
        command = f"python bench/reliability.py --trials {trials} --size-mib {size_mib} --seed {seed}"
        if args.backend:
            command += "".join(f" --backend {b}" for b in backends)
        docresult.write(
            docresult.default_path("reliability"),
            benchmark="reliability",
            title="Killed at a random moment, then run again",
            load=load,
            columns=COLUMNS,
            rows=cells(rows),
            command=command,
        )
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
