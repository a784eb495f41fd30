"""`store.copy` carries referrers, and referrers of referrers, from every backend to another
root; a tag in the same repository copies nothing; a second copy carries nothing again."""

from __future__ import annotations

from pathlib import Path

from tests.registry.conftest import Target, make_tree
from trainops.registry import store
from trainops.registry.backends.base import Descriptor
from trainops.registry.context import Registries


def _attach(reg: Registries, tmp_path: Path, *, on: str, repo: str, name: str) -> str:
    """An eval-kind artifact whose subject is `on` (a pinned ref), pushed untagged; its digest."""
    found = store.resolve(reg, ref=reg.ref(on))
    subject = Descriptor(found.manifest.media_type, found.manifest.digest, len(found.manifest.data))
    tree = make_tree(tmp_path / name, {"eval.json": f'{{"name": "{name}"}}'.encode()})
    return store.push(reg, source=tree, ref=reg.ref(repo), kind="eval", subject=subject).digest


def _referrers(reg: Registries, repo: str, digest: str) -> list[str]:
    ref = reg.ref(repo)
    return [d.digest for d in reg.backend(ref).referrers(ref.repository, digest)]


def test_copy_carries_referrers_to_another_backend(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    ckpt = store.push(reg, source=make_tree(tmp_path / "c", {"w.bin": b"w" * 100}), ref=reg.ref("m/ckpt:2"))
    report = _attach(reg, tmp_path, on=f"m/ckpt@{ckpt.digest}", repo="m/ckpt", name="report")
    note = _attach(reg, tmp_path, on=f"m/ckpt@{report}", repo="m/ckpt", name="note")  # on the report

    mirror = f"file://{tmp_path / 'mirror'}/m/ckpt"
    result = store.copy(reg, src=reg.ref("m/ckpt:2"), dst=reg.ref(f"{mirror}:2"))
    assert result.digest == ckpt.digest and result.referrers == (report, note)
    assert _referrers(reg, mirror, ckpt.digest) == [report]
    assert _referrers(reg, mirror, report) == [note]
    copied = store.resolve(reg, ref=reg.ref(f"{mirror}@{note}"))
    assert copied.manifest.digest == note  # byte for byte

    assert store.copy(reg, src=reg.ref("m/ckpt:2"), dst=reg.ref(f"{mirror}:2")).referrers == ()
    same = store.copy(reg, src=reg.ref("m/ckpt:2"), dst=reg.ref("m/ckpt:again"))
    assert same.referrers == () and _referrers(reg, "m/ckpt", ckpt.digest) == [report]


def test_copy_to_another_repository_of_the_registry_carries_them(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    ckpt = store.push(reg, source=make_tree(tmp_path / "c", {"w.bin": b"v" * 100}), ref=reg.ref("m/ckpt:2"))
    report = _attach(reg, tmp_path, on=f"m/ckpt@{ckpt.digest}", repo="m/ckpt", name="report")
    result = store.copy(reg, src=reg.ref("m/ckpt:2"), dst=reg.ref("prod/ckpt:2"))
    assert result.referrers == (report,) and _referrers(reg, "prod/ckpt", ckpt.digest) == [report]
