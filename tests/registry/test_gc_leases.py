"""gc while pushes are in flight: a push's lease keeps gc off its repository's blobs.

On real backends (a file:// directory, moto's S3 server). A push is paused at a real hook
point, the backend's put_manifest (its blobs are uploaded, its manifest not yet written),
while gc runs; without the lease (the control) the same gc deletes the paused push's
blobs and the artifact it then publishes does not pull. oci:// keeps no leases: its
registry's own garbage collector reclaims blobs.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.registry.conftest import Target, make_tree
from trainops.checkpoint.retention import apply_retention
from trainops.errors import NotFoundError, RemoteError
from trainops.manifest.stages import Retention
from trainops.registry import pulling, store
from trainops.registry.backends.base import Backend, BlobSource, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.retention import lease, removal
from trainops.registry.retention.gc import collect

BOTH = pytest.mark.parametrize("target", ["file", "s3"], indirect=True)


class Paused:
    """Holds every put_manifest of one backend until released: a push stopped after its
    blobs are in the repository and before its manifest is."""

    def __init__(self, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached, self.go = threading.Event(), threading.Event()
        original = backend.put_manifest

        def put_manifest(*args: Any, **kwargs: Any) -> None:
            self.reached.set()
            assert self.go.wait(timeout=120), "the test never released the push"
            original(*args, **kwargs)

        monkeypatch.setattr(backend, "put_manifest", put_manifest)


@contextmanager
def in_thread(func: Callable[[], Any]) -> Iterator[dict[str, Any]]:
    """Run func on a thread; the dict gets its "result" or "error" once the block ends."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = func()
        except BaseException as err:  # reported by the test
            out["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield out
    thread.join(timeout=120)
    assert not thread.is_alive()


def _garbage(target: Target, tmp_path: Path) -> str:
    """An untagged artifact in team/ckpt: what gc removes when it may; its digest."""
    src = make_tree(tmp_path / "old", {"weights.bin": os.urandom(3000)})
    pushed = store.push(target.registries, source=src, ref=target.registries.ref("team/ckpt:old"), kind="checkpoint")
    removal.remove(target.registries, ref=target.registries.ref("team/ckpt:old"))
    return pushed.digest


def _pulls_whole(registries: Registries, ref: str, source: Path, dest: Path) -> bool:
    pulled = pulling.pull(registries, ref=registries.ref(ref), dest=dest)
    return all((dest / rel).read_bytes() == (source / rel).read_bytes() for rel in pulled.files) and bool(pulled.files)


@BOTH
def test_gc_leaves_the_blobs_of_a_paused_push(target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registries = target.registries
    garbage = _garbage(target, tmp_path)
    ref = registries.ref("team/ckpt:new")
    src = make_tree(tmp_path / "new", {"weights.bin": os.urandom(5000), "optim.bin": os.urandom(4000)})
    paused = Paused(registries.backend(ref), monkeypatch)
    with in_thread(lambda: store.push(registries, source=src, ref=ref, kind="checkpoint")) as pushed:
        assert paused.reached.wait(timeout=60)
        during = collect(registries, root=registries.root())
        paused.go.set()
    assert "error" not in pushed, pushed.get("error")
    assert during.skipped_repositories == [ref.repo_url]
    assert during.removed_blobs == 0 and during.removed_manifests == []
    assert any("push(es) in flight" in note for note in during.notes)
    assert _pulls_whole(registries, "team/ckpt:new", src, tmp_path / "pulled")
    assert registries.backend(ref).list_leases(ref.repository) == []  # dropped with the manifest
    after = collect(registries, root=registries.root())  # nothing in flight: the garbage goes
    assert after.skipped_repositories == [] and after.removed_manifests == [f"{ref.repo_url}@{garbage}"]
    assert after.removed_blobs >= 1
    assert _pulls_whole(registries, "team/ckpt:new", src, tmp_path / "pulled-again")


@BOTH
def test_control_without_the_lease_gc_deletes_the_paused_pushs_blobs(
    target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the lease prevents: the same run with leases switched off publishes an
    artifact whose blobs gc removed."""
    registries = target.registries
    _garbage(target, tmp_path)
    ref = registries.ref("team/ckpt:new")
    backend = registries.backend(ref)
    monkeypatch.setattr(backend, "put_lease", lambda repo, name, owner: None)
    src = make_tree(tmp_path / "new", {"weights.bin": os.urandom(5000)})
    paused = Paused(backend, monkeypatch)
    with in_thread(lambda: store.push(registries, source=src, ref=ref, kind="checkpoint")) as pushed:
        assert paused.reached.wait(timeout=60)
        during = collect(registries, root=registries.root())
        paused.go.set()
    assert "error" not in pushed
    assert during.skipped_repositories == [] and during.removed_blobs >= 2
    with pytest.raises(NotFoundError):
        pulling.pull(registries, ref=ref, dest=tmp_path / "pulled")


class _Seen(logging.Handler):
    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text, self.event = text, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


@BOTH
def test_a_push_waits_while_gc_holds_the_lock(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    _garbage(target, tmp_path)
    ref = registries.ref("team/ckpt:new")
    backend = registries.backend(ref)
    owner = lease.owner_token("gc")
    assert backend.take_gc_lock(ref.repository, owner, stale_before=time.time() - 60)
    seen = _Seen("holds the repository's lock")
    logging.getLogger("trainops.retry").addHandler(seen)
    src = make_tree(tmp_path / "new", {"weights.bin": os.urandom(5000)})
    try:
        with in_thread(lambda: store.push(registries, source=src, ref=ref, kind="checkpoint")) as pushed:
            assert seen.event.wait(timeout=60)  # the push said on stderr that it waits
            with pytest.raises(NotFoundError):  # and wrote nothing meanwhile
                store.resolve(registries, ref=ref)
            assert len(backend.list_leases(ref.repository)) == 1  # but gc would see it
            backend.release_gc_lock(ref.repository, owner)
    finally:
        logging.getLogger("trainops.retry").removeHandler(seen)
    assert "error" not in pushed, pushed.get("error")
    assert _pulls_whole(registries, "team/ckpt:new", src, tmp_path / "pulled")


@BOTH
def test_a_dead_gcs_lock_does_not_block_pushes(target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registries = target.registries
    _garbage(target, tmp_path)
    ref = registries.ref("team/ckpt:new")
    backend = registries.backend(ref)
    assert backend.take_gc_lock(ref.repository, "gc pid 1 (killed)", stale_before=time.time() - 60)
    src = make_tree(tmp_path / "new", {"weights.bin": os.urandom(5000)})
    monkeypatch.setattr(lease, "GC_WAIT", 0.0)
    with pytest.raises(RemoteError, match="kept its lock"):  # a live lock, and no time to wait
        store.push(registries, source=src, ref=ref, kind="checkpoint")
    with pytest.raises(NotFoundError):
        store.resolve(registries, ref=ref)
    with monkeypatch.context() as later:
        later.setattr(lease, "LOCK_TTL", 0.0)  # now every lock is older than its time to live
        store.push(registries, source=src, ref=ref, kind="checkpoint")
    assert _pulls_whole(registries, "team/ckpt:new", src, tmp_path / "pulled")
    done = collect(registries, root=registries.root())  # to another gc, a lock this young is live
    assert done.skipped_repositories == [ref.repo_url] and done.removed_manifests == []
    assert any("another gc run holds its lock" in note for note in done.notes)


@BOTH
def test_a_killed_pushs_lease_goes_after_the_grace(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    garbage = _garbage(target, tmp_path)
    ref = registries.ref("team/ckpt")
    backend = registries.backend(ref)
    name = uuid.uuid4().hex
    backend.put_lease(ref.repository, name, "push pid 1 (killed)")
    grace = 3600.0
    if target.scheme == "file":  # an hour and more ago; S3 sets LastModified itself: grace 0
        lease_file = Path(ref.repository) / ".trainops" / "leases" / name
        os.utime(lease_file, (time.time() - 7200, time.time() - 7200))
    else:
        held = collect(registries, root=registries.root())
        assert held.skipped_repositories == [ref.repo_url] and held.removed_manifests == []
        grace = 0.0
    dry = collect(registries, root=registries.root(), grace=grace, dry_run=True)
    assert dry.removed_leases == 1 and len(backend.list_leases(ref.repository)) == 1
    done = collect(registries, root=registries.root(), grace=grace)
    assert done.removed_leases == 1 and done.skipped_repositories == []
    assert done.removed_manifests == [f"{ref.repo_url}@{garbage}"]
    assert backend.list_leases(ref.repository) == []


@BOTH
def test_the_blobs_of_a_killed_first_push_go_with_its_lease(target: Target, tmp_path: Path) -> None:
    """A repository whose first push was killed holds blobs and a lease, and no manifest."""
    registries = target.registries
    ref = registries.ref("team/fresh")
    backend = registries.backend(ref)
    data = os.urandom(3000)
    (tmp_path / "blob").write_bytes(data)
    backend.put_lease(ref.repository, uuid.uuid4().hex, "push pid 1 (killed)")
    backend.upload_blob(ref.repository, BlobSource(sha256_digest(data), len(data), path=tmp_path / "blob"))
    held = collect(registries, root=registries.root())
    assert held.removed_blobs == 0 and held.skipped_repositories == [ref.repo_url]  # it might be alive
    grace = 3600.0
    if target.scheme == "file":  # two hours ago; S3 sets LastModified itself: grace 0 there
        for lease_file in (Path(ref.repository) / ".trainops" / "leases").iterdir():
            os.utime(lease_file, (time.time() - 7200, time.time() - 7200))
    else:
        grace = 0.0
    done = collect(registries, root=registries.root(), grace=grace)
    assert done.removed_leases == 1 and done.removed_blobs == 1 and done.bytes_freed >= 3000
    assert backend.list_blobs(ref.repository) == [] and backend.list_leases(ref.repository) == []


@BOTH
def test_gc_goes_on_when_another_deleting_path_removed_its_garbage_first(
    target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention (or `registry rm`) deletes manifests without gc's lock: between gc's scan and
    its delete, the untagged manifest gc found may be removed by another deleting path. The
    interleaving is forced at the backend's delete_manifest: the manifest is already gone,
    as wanted, and gc goes on to sweep its blobs instead of failing the run."""
    registries = target.registries
    garbage = _garbage(target, tmp_path)
    keep_src = make_tree(tmp_path / "kept", {"weights.bin": os.urandom(3000)})
    store.push(registries, source=keep_src, ref=registries.ref("team/ckpt:kept"), kind="checkpoint")
    ref = registries.ref("team/ckpt")
    backend = registries.backend(ref)
    original = backend.delete_manifest
    first: list[str] = []

    def delete_manifest(repo: str, digest: str) -> None:
        if not first:
            first.append(digest)
            with Registries(default_registry=target.url) as other:  # another process's removal
                removal.remove(other, ref=other.ref(f"team/ckpt@{digest}"))
        original(repo, digest)

    monkeypatch.setattr(backend, "delete_manifest", delete_manifest)
    done = collect(registries, root=registries.root())
    assert first == [garbage]
    assert garbage not in backend.list_manifests(ref.repository)
    assert done.removed_manifests == []  # the other path removed it, not this run
    assert done.removed_blobs >= 1  # its blobs are swept all the same
    assert _pulls_whole(registries, "team/ckpt:kept", keep_src, tmp_path / "pulled")


@BOTH
def test_pushes_retention_and_gc_at_once_leave_every_tag_whole(target: Target, tmp_path: Path) -> None:
    """Three pushers (step-N checkpoints; one file's content drawn from a pool of four, so
    pushes find blobs that earlier, pruned checkpoints left as garbage), retention keeping
    the newest three, and gc in a loop, for as long as the pushes take; then every tag pulls
    whole and verified."""
    url, pushers, each = target.url, 3, 6
    pool = [os.urandom(2048) for _ in range(4)]
    sources: dict[str, Path] = {}
    stop = threading.Event()
    errors: list[str] = []  # which thread raised, with its traceback
    runs: list[Any] = []

    def pusher(index: int) -> None:
        rng = random.Random(index)
        with Registries(default_registry=url) as registries:
            for n in range(each):
                step = (n * pushers + index + 1) * 100
                src = make_tree(
                    tmp_path / f"src-{step}", {"weights.bin": os.urandom(4096), "shared.bin": rng.choice(pool)}
                )
                sources[f"step-{step}"] = src
                store.push(registries, source=src, ref=registries.ref(f"team/ckpt:step-{step}"), kind="checkpoint")

    def keeper(action: Callable[[Registries], Any]) -> None:
        with Registries(default_registry=url) as registries:
            while not stop.wait(0.05):
                runs.append(action(registries))

    def guarded(who: str, func: Callable[..., None], *args: Any) -> Callable[[], None]:
        def run() -> None:
            try:
                func(*args)
            except BaseException:
                errors.append(f"{who}: {traceback.format_exc()}")

        return run

    retention = guarded(
        "retention",
        keeper,
        lambda r: apply_retention(r, repository=r.ref("team/ckpt"), keep=Retention(last=3)),
    )
    gc = guarded("gc", keeper, lambda r: collect(r, root=r.root()))
    background = [threading.Thread(target=retention), threading.Thread(target=gc)]
    writers = [threading.Thread(target=guarded(f"pusher {i}", pusher, i)) for i in range(pushers)]
    for thread in background + writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=600)
    stop.set()
    for thread in background:
        thread.join(timeout=600)
    assert errors == []
    registries = target.registries
    apply_retention(registries, repository=registries.ref("team/ckpt"), keep=Retention(last=3))
    final = collect(registries, root=registries.root())
    gc_runs = [r for r in runs if hasattr(r, "bytes_freed")] + [final]
    assert sum(r.bytes_freed for r in gc_runs) > 0  # gc did remove the pruned checkpoints
    tags = registries.backend(registries.ref("team/ckpt")).list_tags(registries.ref("team/ckpt").repository)
    steps = sorted((t for t in tags if t.startswith("step-")), key=lambda t: int(t[5:]))
    assert steps == [f"step-{s * 100}" for s in range(pushers * each - 2, pushers * each + 1)]
    broken = [t for t in steps if not _pulls_whole(registries, f"team/ckpt:{t}", sources[t], tmp_path / f"pull-{t}")]
    assert broken == []
