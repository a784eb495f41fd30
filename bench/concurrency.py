"""Concurrency: many writers at once on every backend and on a GitOps branch; count lost updates.

- Tag moves: W writer processes, each moving its own tag M times between two artifacts of its
  own (and, every time, a tag all writers share) in ONE repository, on file://, oci://
  (Distribution) and s3:// (moto). A lost update is a writer's tag that does not end on the
  writer's last move, a tag that vanished, or a shared tag that names an artifact that does
  not pull whole.
- gc during pushes: P pusher processes, each pushing C step-N checkpoints into its own
  repository with a short pause between two (a new 1 MiB file each, and one drawn from a
  pool of four, so pushes find blobs that pruned checkpoints left as garbage), while a
  retention process keeps the newest three of each and a gc process runs `registry gc`
  in a loop, on file:// and s3://. A broken artifact is a tag that does not pull whole and
  verified; a lost update is one of the newest three that is missing. (oci://: the
  registry's own garbage collector reclaims blobs, out of scope.)
- GitOps commits: W writer processes, each committing C times to its own path of one branch
  of a bare repository through `trainops.gitops.write_tree` (fetch, re-apply, retry). A lost
  update is a commit missing from the history or a path whose final content is not the
  writer's last commit.

    python bench/concurrency.py              # 8 writers x 100 tag moves, 4 pushers x 25 pushes + gc, 8 x 25 commits
    python bench/concurrency.py --quick      # 4 x 10, 2 x 5 and 4 x 5: seconds
    python bench/concurrency.py --doc        # also write docs/operations/results/concurrency.json

Exits 1 when any update was lost or an operation failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.services import DistributionRegistry, MotoS3, bare_git_repo, git_env  # noqa: E402


@dataclass
class Row:
    target: str
    what: str
    operations: int = 0
    failures: int = 0
    lost_updates: int = 0
    retries: int = 0
    broken: int | None = None  # artifacts that do not pull whole (the gc matrix)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failures == 0 and self.lost_updates == 0 and not self.broken


def _tag_writer(registry: str, env: dict[str, str], index: int, moves: int, barrier: Any, queue: Any) -> None:
    os.environ.update(env)
    from trainops.registry import store
    from trainops.registry.context import Registries

    registries = Registries(default_registry=registry, insecure_registries=tuple(env.get("INSECURE", "").split(",")))
    work = Path(tempfile.mkdtemp(prefix=f"tagw{index}-"))
    digests = []
    for name in ("a", "b"):
        (work / name).write_text(f"writer {index} artifact {name}\n")
        digests.append(store.push(registries, source=work / name, ref=registries.ref(f"moves:w{index}-{name}")).digest)
    failures, last = 0, None
    barrier.wait(timeout=300)
    for move in range(moves):
        pick = "ab"[move % 2]
        try:
            store.tag(registries, src=registries.ref(f"moves:w{index}-{pick}"), dst=registries.ref(f"moves:w{index}"))
            last = digests[move % 2]
            store.tag(registries, src=registries.ref(f"moves:w{index}-{pick}"), dst=registries.ref("moves:shared"))
        except Exception as err:  # counted, reported with the figures
            failures += 1
            queue.put(("note", index, f"{type(err).__name__}: {err}"))
    queue.put(("done", index, {"failures": failures, "last": last, "digests": digests}))


def _run_writers(
    row: Row, writers: int, target: Callable[..., None], args: Callable[[int], tuple[Any, ...]]
) -> dict[int, dict[str, Any]]:
    """Start `writers` processes of target(*args(i), barrier, queue) released together by the
    barrier; collect each one's result (its notes go to the row); time them into the row."""
    context = multiprocessing.get_context("spawn")
    barrier, queue = context.Barrier(writers), context.Queue()
    procs = [context.Process(target=target, args=(*args(i), barrier, queue)) for i in range(writers)]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    results = _collect(row, queue, procs, "writer ")
    row.seconds = round(time.perf_counter() - started, 2)
    return results


def _listing_disagrees(registries: Any, row: Row, results: dict[int, dict[str, Any]], shared: str) -> int:
    """1 when the repository's tag listing with digests (file:// index.json, the s3:// tag
    index; oci:// has none) misses a tag or names another digest than the tag resolves to."""
    ref = registries.ref("moves:shared")
    listed = registries.backend(ref).tag_targets(ref.repository)
    if listed is None:
        return 0
    expected = {f"w{i}": r["last"] for i, r in results.items()} | {"shared": shared}
    wrong = {tag: listed.get(tag) for tag, digest in expected.items() if listed.get(tag) != digest}
    if wrong:
        row.notes.append(f"the tag listing disagrees with the tags for {sorted(wrong)}")
    return 1 if wrong else 0


def tag_moves(registry: str, env: dict[str, str], writers: int, moves: int) -> Row:
    from trainops.registry import pulling, store
    from trainops.registry.context import Registries

    row = Row(registry.split(":")[0], f"{writers} writers x {moves} tag moves (+ a shared tag)")
    results = _run_writers(row, writers, _tag_writer, lambda i: (registry, env, i, moves))
    row.operations = writers * moves * 2
    row.failures = sum(r["failures"] for r in results.values())
    old = dict(os.environ)
    os.environ.update(env)
    try:
        registries = Registries(
            default_registry=registry, insecure_registries=tuple(env.get("INSECURE", "").split(","))
        )
        for index, result in results.items():
            try:
                now = store.resolve(registries, ref=registries.ref(f"moves:w{index}")).parsed.digest
            except Exception:
                now = None
            if now != result["last"]:
                row.lost_updates += 1
                row.notes.append(f"writer {index}: its tag ends on {now}, its last move was to {result['last']}")
        shared = store.resolve(registries, ref=registries.ref("moves:shared")).parsed.digest
        row.lost_updates += _listing_disagrees(registries, row, results, shared)
        every = {d for r in results.values() for d in r["digests"]}
        out = Path(tempfile.mkdtemp(prefix="shared-"))
        if (
            shared not in every
            or not pulling.pull(registries, ref=registries.ref("moves:shared"), dest=out / "d").files
        ):
            row.lost_updates += 1
            row.notes.append(f"the shared tag names {shared}, which no writer moved it to, or does not pull whole")
    finally:
        os.environ.clear()
        os.environ.update(old)
    return row


def _pusher(registry: str, env: dict[str, str], index: int, pushes: int, barrier: Any, queue: Any) -> None:
    """Push step-N checkpoints into repository gc<index>, a short random pause between two
    (a checkpoint watcher's rhythm, shortened)."""
    os.environ.update(env)
    import random

    from trainops.registry import store
    from trainops.registry.context import Registries

    rng = random.Random(index)
    pool = [random.Random(n).randbytes(256 * 1024) for n in range(4)]
    work = Path(tempfile.mkdtemp(prefix=f"gcpush{index}-"))
    failures = 0
    barrier.wait(timeout=300)
    with Registries(default_registry=registry) as registries:
        for n in range(pushes):
            src = work / f"step-{(n + 1) * 100}"
            src.mkdir()
            (src / "weights.bin").write_bytes(os.urandom(1024 * 1024))
            (src / "shared.bin").write_bytes(rng.choice(pool))
            try:
                store.push(registries, source=src, ref=registries.ref(f"gc{index}:{src.name}"), kind="checkpoint")
            except Exception as err:
                failures += 1
                queue.put(("note", index, f"{src.name}: {type(err).__name__}: {err}"))
            time.sleep(rng.uniform(0.1, 0.5))
    queue.put(("done", index, {"failures": failures}))


def _keeper(registry: str, env: dict[str, str], role: str, repos: int, stop: Any, queue: Any) -> None:
    """Retention (the newest three of each repository) or gc, again and again until stop."""
    os.environ.update(env)
    from trainops.checkpoint.retention import apply_retention
    from trainops.manifest.stages import Retention
    from trainops.registry.context import Registries
    from trainops.registry.retention.gc import collect

    tally = {"runs": 0, "failures": 0, "deferred": 0, "deleting": 0, "freed": 0}
    with Registries(default_registry=registry) as registries:
        while not stop.wait(0.05):
            tally["runs"] += 1
            try:
                if role == "gc":
                    result = collect(registries, root=registries.root())
                    tally["deferred"] += len(result.skipped_repositories)
                    tally["deleting"] += result.removed_blobs > 0
                    tally["freed"] += result.bytes_freed
                else:
                    for i in range(repos):
                        apply_retention(registries, repository=registries.ref(f"gc{i}"), keep=Retention(last=3))
            except Exception as err:
                tally["failures"] += 1
                queue.put(("note", role, f"{type(err).__name__}: {err}"))
    queue.put(("done", role, tally))


def gc_during_pushes(registry: str, env: dict[str, str], writers: int, pushes: int) -> Row:
    """Pushers (one repository each), retention and gc at once; then every tag must pull whole."""
    from trainops.checkpoint.retention import apply_retention
    from trainops.manifest.stages import Retention
    from trainops.registry.context import Registries
    from trainops.registry.retention.gc import collect

    row = Row(registry.split(":")[0], f"{writers} pushers x {pushes} checkpoints, retention and gc in a loop")
    context = multiprocessing.get_context("spawn")
    stop, queue = context.Event(), context.Queue()
    keepers = [
        context.Process(target=_keeper, args=(registry, env, role, writers, stop, queue))
        for role in ("gc", "retention")
    ]
    for proc in keepers:
        proc.start()
    pushed = _run_writers(row, writers, _pusher, lambda i: (registry, env, i, pushes))
    stop.set()
    kept = _collect(row, queue, keepers)
    row.operations = writers * pushes + kept["gc"]["runs"] + kept["retention"]["runs"]
    row.failures = sum(r["failures"] for r in [*pushed.values(), *kept.values()])
    old = dict(os.environ)
    os.environ.update(env)
    try:
        with Registries(default_registry=registry) as registries:
            for i in range(writers):
                apply_retention(registries, repository=registries.ref(f"gc{i}"), keep=Retention(last=3))
            after = collect(registries, root=registries.root()).bytes_freed
            row.lost_updates, row.broken = _check_repositories(registries, writers, pushes)
    finally:
        os.environ.clear()
        os.environ.update(old)
    gc = kept["gc"]
    row.what += (
        f": {gc['runs']} gc runs, {gc['deleting']} of them deleting blobs meanwhile, {gc['deferred']} repositories"
        f" passed over (a push in flight); {gc['freed'] / 2**20:.0f} MiB freed meanwhile, {after / 2**20:.0f} after"
    )
    return row


def _collect(row: Row, queue: Any, procs: list[Any], label: str = "") -> dict[Any, dict[str, Any]]:
    """The "done" payload of each of procs by its key (their notes go to the row); joins them."""
    results: dict[Any, dict[str, Any]] = {}
    while len(results) < len(procs):
        kind, key, payload = queue.get(timeout=1800)
        if kind == "note":
            row.notes.append(f"{label}{key}: {payload}")
        else:
            results[key] = payload
    for proc in procs:
        proc.join(timeout=60)
    return results


def _check_repositories(registries: Any, writers: int, pushes: int) -> tuple[int, int]:
    """(newest three checkpoints missing, tags that do not pull whole) over every repository."""
    missing = broken = 0
    for i in range(writers):
        repo = registries.ref(f"gc{i}")
        steps = [t for t in registries.backend(repo).list_tags(repo.repository) if t.startswith("step-")]
        missing += len({f"step-{s * 100}" for s in range(pushes - 2, pushes + 1)} - set(steps))
        broken += sum(not _pulls_whole(registries, f"gc{i}:{tag}") for tag in steps)
    return missing, broken


def _pulls_whole(registries: Any, ref: str) -> bool:
    from trainops.registry import pulling

    out = Path(tempfile.mkdtemp(prefix="gcpull-"))
    try:
        return bool(pulling.pull(registries, ref=registries.ref(ref), dest=out / "d").files)
    except Exception:
        return False
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _committer(remote: str, index: int, commits: int, barrier: Any, queue: Any) -> None:
    from trainops.gitops import write_tree

    attempts, failures = 0, 0
    barrier.wait(timeout=300)
    for n in range(commits):
        try:
            result = write_tree(
                repo=remote,
                branch="main",
                path=f"apps/w{index}",
                files={"state.yaml": f"writer: {index}\ncommit: {n}\n"},
                message=f"writer {index} commit {n}",
                trailers={"Trainops-Writer": str(index), "Trainops-Commit": str(n)},
                max_attempts=200,
            )
            attempts += result.attempts
        except Exception as err:
            failures += 1
            queue.put(("note", index, f"{type(err).__name__}: {err}"))
    queue.put(("done", index, {"attempts": attempts, "failures": failures}))


def gitops_commits(work: Path, writers: int, commits: int) -> Row:
    from trainops.gitops import history

    row = Row("git", f"{writers} committers x {commits} commits, one branch")
    remote = bare_git_repo(work / f"gitops-{uuid.uuid4().hex[:6]}.git")
    seed = work / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True, env=git_env())
    (seed / "README").write_text("gitops\n")
    for args in (["add", "README"], ["commit", "-qm", "seed"], ["push", "-q", str(remote), "main"]):
        subprocess.run(["git", *args], cwd=seed, check=True, env=git_env())
    done = _run_writers(row, writers, _committer, lambda i: (str(remote), i, commits))
    row.operations = writers * commits
    row.failures = sum(d["failures"] for d in done.values())
    row.retries = sum(d["attempts"] for d in done.values()) - (row.operations - row.failures)
    entries = history(repo=str(remote), branch="main", limit=writers * commits + 10)
    landed = {(e.trailers.get("Trainops-Writer"), e.trailers.get("Trainops-Commit")) for e in entries}
    expected = {(str(i), str(n)) for i in range(writers) for n in range(commits)}
    row.lost_updates = len(expected - landed)
    for i in range(writers):
        final = subprocess.run(
            ["git", "--git-dir", str(remote), "show", f"main:apps/w{i}/state.yaml"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if final != f"writer: {i}\ncommit: {commits - 1}\n":
            row.lost_updates += 1
            row.notes.append(f"writer {i}: its path ends as {final!r}")
    return row


def run_all(
    *, writers: int, moves: int, pushers: int, pushes: int, committers: int, commits: int, backends: list[str]
) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="trainops-conc-") as tmp:
        work = Path(tmp)
        registry, s3 = DistributionRegistry(work / "distribution"), MotoS3(work / "moto")
        try:
            for backend in backends:
                if backend == "file":
                    rows.append(tag_moves(f"file://{work / 'layout'}", {}, writers, moves))
                    rows.append(gc_during_pushes(f"file://{work / 'gc'}", {}, pushers, pushes))
                elif backend == "oci":
                    registry.start()
                    rows.append(tag_moves(f"oci://{registry.host}/conc", {"INSECURE": registry.host}, writers, moves))
                else:
                    s3.start()
                    bucket = s3.new_bucket(f"conc-{uuid.uuid4().hex[:8]}")
                    rows.append(tag_moves(f"s3://{bucket}/conc", dict(s3.env), writers, moves))
                    rows.append(gc_during_pushes(f"s3://{bucket}/gcpush", dict(s3.env), pushers, pushes))
            rows.append(gitops_commits(work, committers, commits))
        finally:
            registry.stop()
            s3.stop()
    return rows


COLUMNS = ("target", "what", "operations", "failures", "lost updates", "broken artifacts", "retries", "seconds")


def cells(rows: list[Row]) -> list[list[str]]:
    """Each row as the table shows it."""
    return [
        [
            r.target,
            r.what,
            str(r.operations),
            str(r.failures),
            str(r.lost_updates),
            "—" if r.broken is None else str(r.broken),
            str(r.retries),
            str(r.seconds),
        ]
        for r in rows
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="4 writers x 10 moves, 2 pushers x 5 pushes, 4 committers x 5 commits"
    )
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--moves", type=int, default=100)
    parser.add_argument("--commits", type=int, default=25)
    parser.add_argument("--pushers", type=int, default=4, help="processes pushing while gc runs")
    parser.add_argument("--pushes", type=int, default=25, help="checkpoints each pusher pushes")
    parser.add_argument("--backend", action="append", choices=["file", "oci", "s3"], default=None)
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/concurrency.json")
    args = parser.parse_args()
    writers, moves, commits = (4, 10, 5) if args.quick else (args.writers, args.moves, args.commits)
    pushers, pushes = (2, 5) if args.quick else (args.pushers, args.pushes)
    load = docresult.Load()
    rows = run_all(
        writers=writers,
        moves=moves,
        pushers=pushers,
        pushes=pushes,
        committers=writers,
        commits=commits,
        backends=args.backend or ["file", "oci", "s3"],
    )
    print(docresult.table(COLUMNS, cells(rows)))
    print(load.text())
    for r in rows:
        for note in r.notes[:5]:
            print(f"note: {r.target}: {note}")
    if not args.quick:  # a quick run checks that the benchmark runs: it writes no results
        results = ROOT / "bench" / "results"
        results.mkdir(exist_ok=True)
        (results / "concurrency.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    if args.doc:
        docresult.write(
            docresult.default_path("concurrency"),
            benchmark="concurrency",
            title="Many writers at once",
            load=load,
            columns=COLUMNS,
            rows=cells(rows),
            command=(
                f"python bench/concurrency.py --writers {writers} --moves {moves} --pushers {pushers}"
                f" --pushes {pushes} --commits {commits}" + "".join(f" --backend {b}" for b in args.backend or [])
            ),
        )
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
