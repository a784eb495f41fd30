"""The smaller stumbles of a first day with trainops, each as a new user met it.

- `registry ls oci://HOST:PORT` lists the registry's repositories (its catalog), as the
  help says, instead of refusing the URL as a reference without a repository;
- `registry ls -l` of a registry marks a repository that holds no tag (an interrupted first
  push leaves its blobs and no artifact) instead of showing it as if it were one;
- a host name that does not resolve fails at once: no retries, no backoff;
- lineage edges read in the direction walked (down from step-600: `resumed-by` step-700,
  not `resumed-from`), and the stage records of `trainops run` show only with --records.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

from trainops.registry import store
from trainops.registry.backends.base import BlobSource, sha256_digest
from trainops.registry.context import Registries
from trainops_testing.cli import run
from trainops_testing.services import DistributionRegistry


def test_registry_ls_of_a_registry_url_lists_its_repositories(registry: DistributionRegistry) -> None:
    env = {"TRAINOPS_INSECURE_REGISTRIES": registry.host}
    for repo in ("team/a", "team/b"):
        done = run("push", __file__, f"oci://{registry.host}/{repo}:v1", env=env)
        assert done.code == 0, done.stderr
    # An interrupted first push: a blob arrived, no manifest, no tag.
    data = b"half a checkpoint"
    with Registries(insecure_registries=(registry.host,)) as registries:
        ref = registries.ref(f"oci://{registry.host}/team/interrupted")
        source = BlobSource(digest=sha256_digest(data), size=len(data), opener=lambda: io.BytesIO(data))
        registries.backend(ref).upload_blob(ref.repository, source, lambda n: None)
    listed = run("registry", "ls", f"oci://{registry.host}", env=env)
    assert listed.code == 0, listed.stderr
    names = listed.stdout.splitlines()
    assert {f"oci://{registry.host}/team/a", f"oci://{registry.host}/team/b"} <= set(names)
    long = run("registry", "ls", "-l", f"oci://{registry.host}/", env=env)
    assert long.code == 0, long.stderr
    rows = long.stdout.splitlines()
    assert f"oci://{registry.host}/team/a" in rows  # an artifact: as it is
    marked = [r for r in rows if r.startswith(f"oci://{registry.host}/team/interrupted")]
    assert marked == [f"oci://{registry.host}/team/interrupted  (no tags: no artifact; an interrupted push's blobs)"]


def test_a_host_that_does_not_resolve_fails_at_once() -> None:
    started = time.monotonic()
    done = run("registry", "ls", "oci://no-such-host.invalid:5000/team/model")
    took = time.monotonic() - started
    assert done.code == 6
    assert "retry" not in done.stderr.lower()
    assert done.stderr.splitlines() == [
        "Error: cannot reach registry no-such-host.invalid:5000: name or service not known (DNS); "
        "check that it runs and the host:port is right"
    ]
    assert took < 5, f"{took:.1f} s: a name that does not resolve was retried"


def test_lineage_edges_read_in_the_walked_direction_and_records_hide(tmp_path: Path) -> None:
    from trainops.registry import media
    from trainops.registry.lineage_data import Lineage, Parent

    url = f"file://{tmp_path / 'registry'}"
    src = tmp_path / "ckpt"
    src.mkdir()
    with Registries(default_registry=url) as registries:

        def push(tag: str, parent: str | None, relation: str, **extra: Any) -> str:
            (src / "weights.bin").write_bytes(tag.encode() * 100)
            parents = (Parent(digest=parent, ref=f"{url}/proj/ckpt", relation=relation),) if parent else ()
            ref = registries.ref(tag)
            return store.push(registries, source=src, ref=ref, lineage=Lineage(parents=parents), **extra).digest

        s600 = push("proj/ckpt:step-600", None, "parent", kind="checkpoint")
        s700 = push("proj/ckpt:step-700", s600, "resumed-from", kind="checkpoint")
        push("proj/stages:train-1", s700, "parent", annotations={media.A_STAGE_KEY: "sha256:" + "a" * 64})
    wide = {"COLUMNS": "400"}  # one line a node: the test's long temporary path is not folded
    up = run("lineage", f"{url}/proj/ckpt:step-700", env=wide)
    assert up.code == 0, up.stderr
    assert up.stdout.splitlines()[1].startswith(f"└── resumed-from: checkpoint {url}/proj/ckpt [{s600[7:19]}]")
    down = run("lineage", f"{url}/proj/ckpt:step-600", "--down", env=wide)
    assert down.code == 0, down.stderr
    assert down.stdout.splitlines()[1].startswith(f"└── resumed-by: checkpoint {url}/proj/ckpt:step-700 ")
    assert "proj/stages" not in down.stdout  # a stage record is bookkeeping: hidden
    records = run("lineage", f"{url}/proj/ckpt:step-600", "--down", "--records", env=wide)
    assert f"└── child: other {url}/proj/stages:train-1 " in records.stdout


def test_plan_fits_80_columns_piped_and_folds_references_between_their_parts() -> None:
    from trainops_testing.cli import REPO

    manifest = REPO / "examples" / "tiny-llm" / "trainops.yaml"
    done = run("plan", "-f", str(manifest), env={"COLUMNS": None})  # piped, no COLUMNS: 80
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, done.stdout
    references = ["file://.trainops/registry/tiny-llm/checkpoints", "file://.trainops/registry/tiny-llm/image"]
    for line in lines[2:-3]:  # the stages' rows: the table's columns, each folded to its width
        for word in line.split():
            for reference in references:
                at = reference.find(word)
                if at > 0 and "/" in word:  # a continuation line of a folded reference
                    assert reference[at - 1] in "/:", f"{word!r} starts mid-name in {reference}"
    assert "file://" in done.stdout and "file:\n" not in done.stdout


def test_lineage_tree_fits_80_columns_piped_folding_references_between_their_parts(tmp_path: Path) -> None:
    from trainops.registry.lineage_data import Lineage, Parent

    root = tmp_path / "registries" / "of-the-first-day" / "a-registry-whose-path" / "takes-a-whole-screen-line"
    url = f"file://{root}"
    src = tmp_path / "ckpt"
    src.mkdir()
    digests: dict[int, str] = {}
    with Registries(default_registry=url) as registries:
        for step in (100, 200, 300):  # each checkpoint resumed from the one before
            (src / "weights.bin").write_bytes(str(step).encode() * 100)
            before = [digests[step - 100]] if step > 100 else []
            parents = [Parent(digest=d, ref=f"{url}/proj/checkpoints", relation="resumed-from") for d in before]
            metrics = {"loss": 3.0 / step, "perplexity": 20.0 - step / 100, "tokens_per_second": 1234.5 * step}
            lineage = Lineage(step=step, metrics=metrics, parents=tuple(parents))
            ref = registries.ref(f"proj/checkpoints:step-{step}")
            digests[step] = store.push(registries, source=src, ref=ref, lineage=lineage, kind="checkpoint").digest
    references = [f"{url}/proj/checkpoints:step-{step}" for step in digests] + [f"{url}/proj/checkpoints"]
    for args in (("--up",), ("--down",)):
        start = "step-300" if args == ("--up",) else "step-100"
        done = run("lineage", f"{url}/proj/checkpoints:{start}", *args, env={"COLUMNS": None})  # piped: 80
        assert done.code == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) > 3 and all(len(line) <= 80 for line in lines), done.stdout
        words = [w for line in lines for w in line.split() if w not in ("│", "├──", "└──")]
        for word in (w for w in words if "/" in w or ":" in w[:-1]):  # a reference, or a piece of one
            whole_parts = [  # where word starts and ends between the parts of a reference
                r
                for r in references
                if (at := r.find(word)) >= 0
                and (at == 0 or r[at - 1] in "/:")
                and (at + len(word) == len(r) or word[-1] in "/:")
            ]
            assert whole_parts, f"{word!r} is cut mid-name:\n{done.stdout}"
        joined = "".join(words)
        assert f"{url}/proj/checkpoints:{start}" in joined  # the whole reference, in order
        metric_lines = [line for line in lines if "loss=" in line]
        assert len(metric_lines) == 3, done.stdout  # each node's metrics on a line of their own
        assert all(line.split("│")[-1].split()[0].startswith("loss=") for line in metric_lines), done.stdout
        assert all(f"[{digests[step][7:19]}]" in done.stdout for step in (100, 200, 300))


def test_registry_ls_long_fits_80_columns_with_whole_times_and_long_tags_whole(tmp_path: Path) -> None:
    import re

    url = f"file://{tmp_path / 'registry'}"
    src = tmp_path / "model"
    src.mkdir()
    long_tag = "release-candidate-for-the-december-rollout-of-the-chat-model"
    with Registries(default_registry=url) as registries:
        for tag in ("v1", long_tag):
            (src / "weights.bin").write_bytes(tag.encode() * 100)
            store.push(registries, source=src, ref=registries.ref(f"proj/model:{tag}"), kind="model")
    done = run("registry", "ls", "-l", f"{url}/proj/model", env={"COLUMNS": None})  # piped: 80
    assert done.code == 0, done.stderr
    heading, *lines = done.stdout.splitlines()
    assert heading == f"{url}/proj/model"  # the repository whole on its own line, as in ckpt ls
    assert all(len(line) <= 80 for line in lines), done.stdout
    assert long_tag in lines, done.stdout  # whole, on a line of its own: folded, not cut
    when = re.compile(r"  \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ  ")  # the one table format, seconds and zone
    rows = [line for line in lines if when.search(line)]
    assert len(rows) == 2 and rows[1].startswith("v1  "), done.stdout
    assert lines[lines.index(long_tag) + 1] == rows[0] and rows[0].startswith("   "), done.stdout  # its cells below
    wide = run("registry", "ls", "-l", "--wide", f"{url}/proj/model", env={"COLUMNS": None})
    assert any(line.startswith(long_tag + "  ") and when.search(line) for line in wide.stdout.splitlines())
