"""Fuzzing (hypothesis) of the parsers that read what users and other tools write.

Each parser either returns its value or raises a TrainopsError with a one-line message;
any other exception is a bug. Examples are bounded in number and size, and every call is
bounded in time by hypothesis' deadline.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainops.checkpoint.layouts import detect_layout, get_layout
from trainops.checkpoint.metrics import read_metrics
from trainops.errors import TrainopsError
from trainops.manifest.load import load_manifest
from trainops.registry.reference import parse_reference

FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"

ref_chars = st.sampled_from([*list(string.ascii_letters + string.digits + "/:@._-+ %~\\\x00é"), "sha256:", "//", "://"])
ref_text = st.one_of(
    st.text(max_size=300),
    st.lists(ref_chars, max_size=80).map("".join),
    st.builds(
        lambda scheme, body, digest: f"{scheme}{body}{digest}",
        st.sampled_from(["", "oci://", "file://", "s3://", "http://", "OCI://", "oci:///"]),
        st.lists(ref_chars, max_size=60).map("".join),
        st.sampled_from(["", "@sha256:" + "a" * 64, "@sha256:" + "A" * 64, "@sha256:abc", "@md5:" + "0" * 32]),
    ),
)


def _one_line(err: TrainopsError) -> None:
    text = str(err)
    assert text.strip(), "an error must say something"
    assert "\n" not in text.strip() or "Traceback" not in text


@FUZZ
@given(text=ref_text)
def test_reference_parser(text: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    base = Path("/tmp/fuzz-base")
    try:
        ref = parse_reference(text, default_registry="oci://127.0.0.1:5000/ns", base_dir=base)
    except TrainopsError as err:
        _one_line(err)
        return
    # A reference that parsed prints as one that parses to the same thing.
    again = parse_reference(str(ref), default_registry="oci://127.0.0.1:5000/ns", base_dir=base)
    assert (again.repository, again.tag, again.digest) == (ref.repository, ref.tag, ref.digest)


def _mutations() -> st.SearchStrategy[str]:
    lines = EXAMPLE.read_text().splitlines()

    def mutate(picks: list[tuple[int, int, str]]) -> str:
        out = list(lines)
        for action, index, text in picks:
            i = index % max(1, len(out))
            if action == 0 and out:
                del out[i]
            elif action == 1:
                out.insert(i, text)
            elif out:
                out[i] = out[i][: len(out[i]) // 2] + text
        return "\n".join(out) + "\n"

    yaml_bits = st.sampled_from(
        [
            "",
            "  ",
            "- x",
            "{",
            "}",
            "[",
            "]",
            ": :",
            "&a [*a]",
            "!!python/object:os.system x",
            "? x",
            "  key: 1e999",
            "gates: 5",
            "  nodes: -1",
            "\t",
            "'",
            '"',
            "|",
            ">",
            "%YAML 1.1",
            "---",
            "...",
            "x: *undefined",
        ]
    )
    return st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 10_000), st.one_of(yaml_bits, st.text(max_size=40))),
        min_size=1,
        max_size=6,
    ).map(mutate)


@FUZZ
@given(text=st.one_of(_mutations(), st.text(max_size=2000)), env=st.sampled_from([None, "dev", "prod", "nosuch"]))
def test_manifest_loader(text: str, env: str | None, tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("m") / "trainops.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_manifest(path, env=env)
    except TrainopsError as err:
        _one_line(err)


tracker_bytes = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=32).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"release", b"12", b"\xef\xbb\xbf12", "²".encode(), "١٢".encode(), b"9" * 5000, b"-3", b" 7 \n"]),
)


@FUZZ
@given(
    tracker=tracker_bytes,
    dirs=st.lists(st.integers(0, 10**30), max_size=4),
    layout=st.sampled_from(["megatron", "deepspeed"]),
)
def test_checkpoint_tracker_files(
    tracker: bytes, dirs: list[int], layout: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("ckpt")
    name = "latest_checkpointed_iteration.txt" if layout == "megatron" else "latest"
    (root / name).write_bytes(tracker)
    for step in dirs:
        (root / (f"iter_{step:07d}" if layout == "megatron" else f"global_step{step}")).mkdir(exist_ok=True)
    (root / "release").mkdir()
    try:
        listing = get_layout(layout).listing(root)
        assert detect_layout(root) is not None
    except TrainopsError as err:
        _one_line(err)
        return
    for found in listing.found:
        assert found.path.parent == root


metric_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@FUZZ
@given(
    state=st.one_of(
        metric_json, st.dictionaries(st.sampled_from(["log_history", "global_step", "best_metric"]), metric_json)
    ),
    raw=st.one_of(st.none(), st.binary(max_size=200)),
)
def test_checkpoint_metrics_files(state: object, raw: bytes | None, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("metrics")
    (root / "trainer_state.json").write_bytes(raw if raw is not None else json.dumps(state).encode())
    (root / "metrics.json").write_bytes(json.dumps(state).encode())
    try:
        metrics = read_metrics(root)
    except TrainopsError as err:
        _one_line(err)
        return
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in metrics.items())
