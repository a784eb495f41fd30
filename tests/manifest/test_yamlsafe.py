"""The manifest YAML loader on hostile and odd input.

Hostile inputs run through both of PyYAML's parsers (the `parser` fixture): libyaml and the
pure-Python one a PyYAML without its C extension falls back to.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from trainops.errors import ManifestError, Problem
from trainops.manifest.load import read_manifest
from trainops.manifest.yamlsafe import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    LoadResult,
    Mark,
    YamlProblem,
    YMap,
    YSeq,
    load_yaml_mapping,
)

T = TypeVar("T")
MB = 1_000_000
CORE = "tag:yaml.org,2002:"


def load(text: str | bytes) -> LoadResult:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return load_yaml_mapping(raw)


def problem(text: str | bytes) -> YamlProblem:
    with pytest.raises(YamlProblem) as caught:
        load(text)
    return caught.value


def timed(call: Callable[[], T]) -> tuple[T | BaseException, float]:
    """Run call; return its result (or the exception it raised) and the CPU seconds it took:
    the work the parser does, which a busy machine does not stretch as it does the wall clock
    (a CI run beside a 16-process benchmark once took 2 s of wall clock here)."""
    start = time.process_time()
    try:
        outcome: T | BaseException = call()
    except Exception as err:
        outcome = err
    return outcome, time.process_time() - start


def peak_memory(call: Callable[[], object]) -> int:
    """Peak bytes allocated through Python's allocator while call runs (its error swallowed)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with contextlib.suppress(Exception):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def plain(value: Any) -> Any:
    """YMap/YSeq turned into dict/list, for comparing with expected data."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# --- hostile input -------------------------------------------------------------------------


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """The classic alias bomb: each level is a list of `width` aliases of the level before."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        aliases = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"l{level}: &l{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_fails_fast_located_and_in_bounded_memory(parser: str) -> None:
    text = billion_laughs()
    assert len(text.splitlines()) == 9

    outcome, seconds = timed(lambda: load(text))
    assert seconds < 2.0, f"{parser}: the alias bomb took {seconds:.2f}s"
    assert isinstance(outcome, YamlProblem), f"{parser}: the alias bomb loaded"
    assert re.fullmatch(
        rf"document expands to more than {MAX_NODES} nodes \(an alias bomb\?\); "
        "a manifest needs far fewer",
        outcome.message,
    )
    # Located: at one of the aliases, on one of the bomb's lines.
    line = text.splitlines()[outcome.mark.line - 1]
    assert 1 <= outcome.mark.line <= 9
    assert line[outcome.mark.column - 1] == "*", (outcome.mark, line)

    peak = peak_memory(lambda: load(text))
    assert peak < 50 * MB, f"{parser}: peak {peak / MB:.1f} MB"


def test_billion_laughs_through_read_manifest_is_a_located_problem(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs(), encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        read_manifest(path)
    [found] = caught.value.problems
    assert re.fullmatch(
        rf"{re.escape(str(path))}:[1-9]:\d+: document expands to more than {MAX_NODES} nodes "
        r"\(an alias bomb\?\); a manifest needs far fewer",
        str(found),
    )


def test_many_aliases_of_one_large_anchor_are_counted_expanded(parser: str) -> None:
    """A quadratic blow-up (1000 aliases of a 1000-item list) is bounded as well."""
    items = ", ".join(str(i) for i in range(1000))
    aliases = ", ".join(["*big"] * 1000)
    text = f"big: &big [{items}]\nuse: [{aliases}]\n"
    outcome, seconds = timed(lambda: load(text))
    assert seconds < 2.0
    assert isinstance(outcome, YamlProblem)
    assert outcome.message.startswith(f"document expands to more than {MAX_NODES} nodes")
    assert outcome.mark.line == 2


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[" * 100_000, id="flow-sequences"),
        pytest.param("a: " + "[" * 100_000 + "]" * 100_000 + "\n", id="closed-sequences"),
        pytest.param("{a: " * 100_000, id="flow-mappings"),
        pytest.param("- " * 100_000, id="block-sequences"),
    ],
)
def test_deep_nesting_fails_fast(parser: str, text: str) -> None:
    outcome, seconds = timed(lambda: load(text))
    assert seconds < 2.0, f"{parser}: {seconds:.2f}s"
    assert isinstance(outcome, YamlProblem), f"{parser}: {outcome!r}"
    assert outcome.message == f"nesting deeper than {MAX_DEPTH} levels; flatten the document"
    assert outcome.mark.line == 1
    peak = peak_memory(lambda: load(text))
    assert peak < 50 * MB


def nested(levels: int) -> str:
    """A mapping holding lists `levels` deep in all (the top mapping is level 1)."""
    inner = "[" * (levels - 1) + "1" + "]" * (levels - 1)
    return f"a: {inner}\n"


def test_nesting_limit_is_exact() -> None:
    data = load(nested(MAX_DEPTH)).data
    node: Any = data["a"]
    for _ in range(MAX_DEPTH - 2):
        node = node[0]
    assert node == [1]
    err = problem(nested(MAX_DEPTH + 1))
    assert err.message.startswith("nesting deeper than")
    assert err.mark == Mark(1, 3 + MAX_DEPTH)  # at the bracket that opens the level too many


def test_huge_file_fails_fast_without_being_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    chunk = b"".join(b"key%07d: value\n" % i for i in range(100_000))  # 1.9 MB
    with path.open("wb") as fh:
        while fh.tell() < 50 * MB:
            fh.write(chunk)
    size = path.stat().st_size

    outcome, seconds = timed(lambda: read_manifest(path))
    assert seconds < 2.0
    assert isinstance(outcome, ManifestError)
    assert [str(p) for p in outcome.problems] == [
        f"{path}:1:1: file is {size / 2**20:.1f} MiB; a manifest may be at most {MAX_BYTES // 2**20} MiB"
    ]
    peak = peak_memory(lambda: read_manifest(path))
    assert peak < 20 * MB, f"peak {peak / MB:.1f} MB while refusing a {size / MB:.0f} MB file"


def test_endless_file_is_not_read_to_its_end() -> None:
    """/dev/zero has no end and no size: reading stops after the limit all the same."""
    outcome, seconds = timed(lambda: read_manifest(Path("/dev/zero")))
    assert seconds < 2.0
    assert isinstance(outcome, ManifestError)
    assert "a manifest may be at most" in str(outcome.problems[0])
    assert peak_memory(lambda: read_manifest(Path("/dev/zero"))) < 20 * MB


def test_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    head = b"a: 1\n"
    path.write_bytes(head + b"#" * (MAX_BYTES - len(head)))
    data, dups = read_manifest(path)
    assert dict(data) == {"a": 1}
    assert dups == []


# --- duplicates, documents, roots ----------------------------------------------------------


def test_every_duplicate_key_is_reported_with_both_lines() -> None:
    text = "a: 1\nb: 2\na: 3\nnested:\n  x: 1\n  y: 2\n  x: 3\nb: 4\na: 5\n"
    result = load(text)
    assert [(d.mark, d.message) for d in result.duplicates] == [
        (Mark(3, 1), "duplicate key 'a' (first written at line 1)"),
        (Mark(7, 3), "duplicate key 'x' (first written at line 5)"),
        (Mark(8, 1), "duplicate key 'b' (first written at line 2)"),
        (Mark(9, 1), "duplicate key 'a' (first written at line 1)"),
    ]
    # The first value is kept (and so is its position).
    assert plain(result.data) == {"a": 1, "b": 2, "nested": {"x": 1, "y": 2}}
    assert result.data.value_marks["a"] == Mark(1, 4)


def test_duplicate_keys_in_flow_mappings_are_reported() -> None:
    result = load("a: {x: 1, x: 2}\n")
    assert [(d.mark, d.message) for d in result.duplicates] == [
        (Mark(1, 11), "duplicate key 'x' (first written at line 1)")
    ]


def test_read_manifest_returns_duplicates_as_located_problems(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("a: 1\nb: 2\na: 3\n", encoding="utf-8")
    data, dups = read_manifest(path)
    assert dict(data) == {"a": 1, "b": 2}
    assert dups == [Problem(str(path), 3, 1, "", "duplicate key 'a' (first written at line 1)")]
    assert str(dups[0]) == f"{path}:3:1: duplicate key 'a' (first written at line 1)"


@pytest.mark.parametrize(
    ("text", "mark"),
    [
        ("a: 1\n---\nb: 2\n", Mark(2, 1)),
        ("---\na: 1\n---\nb: 2\n", Mark(3, 1)),
        ("a: 1\n...\n---\nb: 2\n", Mark(3, 1)),
    ],
)
def test_several_documents_are_refused(text: str, mark: Mark) -> None:
    err = problem(text)
    assert err.message == "expected one YAML document, found several; keep one per file"
    assert err.mark == mark


@pytest.mark.parametrize("text", ["---\na: 1\n", "a: 1\n...\n", "%YAML 1.2\n---\na: 1\n"])
def test_one_explicit_document_is_fine(text: str) -> None:
    assert plain(load(text).data) == {"a": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "expected a YAML mapping at the top, found a list"),
        ("[a, b]\n", "expected a YAML mapping at the top, found a list"),
        ("", "the file is empty; a manifest is a YAML mapping"),
        ("\n\n", "the file is empty; a manifest is a YAML mapping"),
        ("# only a comment\n", "the file is empty; a manifest is a YAML mapping"),
        ("---\n...\n", "the file is empty; a manifest is a YAML mapping"),
    ],
)
def test_non_mapping_roots(text: str, message: str) -> None:
    err = problem(text)
    assert (err.mark, err.message) == (Mark(1, 1), message)


@pytest.mark.parametrize("text", ["42\n", "hello\n", "'quoted'\n", "3.5\n", "true\n", "~\n"])
def test_scalar_roots_are_refused(text: str) -> None:
    err = problem(text)
    assert err.mark == Mark(1, 1)
    assert err.message.startswith(("expected a YAML mapping at the top", "the file is empty"))


# --- tags, encodings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mark", "tag"),
    [
        ("a: !foo 1\n", Mark(1, 4), "!foo"),
        ("a: !!python/object:os.system x\n", Mark(1, 4), f"{CORE}python/object:os.system"),
        ("a: !!python/name:os.system ''\n", Mark(1, 4), f"{CORE}python/name:os.system"),
        ("a: !!binary aGVsbG8=\n", Mark(1, 4), f"{CORE}binary"),
        ("a: !!timestamp 2020-01-01\n", Mark(1, 4), f"{CORE}timestamp"),
        ("a: !!set {x: null}\n", Mark(1, 4), f"{CORE}set"),
        ("a:\n  b: !!omap [x: 1]\n", Mark(2, 6), f"{CORE}omap"),
        ("a: !local [1]\n", Mark(1, 4), "!local"),
        ("a: !<tag:example.com,2000:app/foo> x\n", Mark(1, 4), "tag:example.com,2000:app/foo"),
    ],
)
def test_unknown_tags_are_refused(text: str, mark: Mark, tag: str) -> None:
    err = problem(text)
    assert err.mark == mark
    assert err.message.startswith(f"unsupported tag {tag!r}")


def test_tag_on_a_key_is_refused() -> None:
    err = problem("!foo a: 1\n")
    assert (err.mark, err.message) == (Mark(1, 1), "unsupported tag '!foo' on a key")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: !!str 12\n", "12"),
        ("a: !!int '12'\n", 12),
        ("a: !!float 1\n", 1.0),
        ("a: !!bool true\n", True),
        ("a: !!null ''\n", None),
        ("a: ! 12\n", "12"),
        ("a: !!map {b: 1}\n", {"b": 1}),
        ("a: !!seq [1]\n", [1]),
    ],
)
def test_core_tags_are_honoured(text: str, expected: Any) -> None:
    value = load(text).data["a"]
    assert plain(value) == expected
    kind = dict if isinstance(expected, dict) else list if isinstance(expected, list) else None
    assert isinstance(value, kind) if kind else type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!int 1.5\n", "'1.5' is not a valid !!int"),
        ("a: !!int true\n", "'true' is not a valid !!int"),
        ("a: !!float true\n", "'true' is not a valid !!float"),
        ("a: !!bool yes\n", "'yes' is not a valid !!bool"),
        ("a: !!null x\n", "'x' is not a valid !!null"),
    ],
)
def test_core_tags_check_their_values(text: str, message: str) -> None:
    err = problem(text)
    assert (err.mark, err.message) == (Mark(1, 4), message)


@pytest.mark.parametrize(
    ("raw", "mark"),
    [
        pytest.param(b"a: 1\nb: \xff\n", Mark(2, 4), id="ascii-before"),
        pytest.param(b"name: caf\xe9\n", Mark(1, 10), id="latin-1-file"),
        pytest.param(b"k: \xc3\n", Mark(1, 4), id="truncated-sequence"),
        # Columns count characters, as every other position does, not bytes.
        pytest.param(b"k: \xc3\xa9\xc3\xa9 \xff\n", Mark(1, 7), id="multibyte-before-on-the-line"),
        # The offset of the bad byte is after the BOM: lines and columns must be too.
        pytest.param(b"\xef\xbb\xbfa: 1\n\xff\n", Mark(2, 1), id="after-a-bom"),
    ],
)
def test_non_utf8_is_refused_where_the_bad_byte_is(raw: bytes, mark: Mark) -> None:
    err = problem(raw)
    assert err.message == "file is not valid UTF-8 text"
    assert err.mark == mark


def test_utf8_bom_and_non_ascii_text_are_fine() -> None:
    data = load("\ufeffname: café ☕\n".encode()).data
    assert dict(data) == {"name": "café ☕"}
    assert data.key_marks["name"] == Mark(1, 1)


@pytest.mark.parametrize(
    ("raw", "mark"),
    [(b"a: 1\x00\n", Mark(1, 5)), (b"a: 1\nb: x\x00y\n", Mark(2, 5)), (b"\x00", Mark(1, 1))],
)
def test_nul_byte_is_refused(raw: bytes, mark: Mark) -> None:
    err = problem(raw)
    assert (err.mark, err.message) == (mark, "file contains a NUL byte; not YAML text")


@pytest.mark.parametrize(
    ("text", "mark"),
    [("a: [1, 2\n", Mark(2, 1)), ("a: 1\n b: 2\n", Mark(2, 3)), ("a: 'open\n", Mark(2, 1))],
)
def test_syntax_errors_are_located(parser: str, text: str, mark: Mark) -> None:
    err = problem(text)
    assert err.message.startswith("invalid YAML: ")
    assert err.mark.line == mark.line


def test_unknown_alias_is_located() -> None:
    err = problem("a: 1\nb: *nope\n")
    assert (err.mark, err.message) == (Mark(2, 4), "unknown alias *nope")


@pytest.mark.parametrize(
    ("text", "mark"),
    [
        ("? [a]\n: 1\n", Mark(1, 3)),
        ("? {a: 1}\n: 1\n", Mark(1, 3)),
        ("a: &x {b: 1}\n*x : 2\n", Mark(2, 1)),
    ],
)
def test_keys_must_be_strings(text: str, mark: Mark) -> None:
    err = problem(text)
    assert err.mark == mark
    assert err.message.startswith("mapping keys must be plain strings")


# --- YAML 1.2 core schema ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("no", "no"),
        ("on", "on"),
        ("yes", "yes"),
        ("off", "off"),
        ("y", "y"),
        ("N", "N"),
        ("0777", 777),
        ("0o17", 15),
        ("0x1f", 31),
        ("0x1F", 31),
        ("-12", -12),
        ("+12", 12),
        ("1e3", 1000.0),
        ("1.5", 1.5),
        ("-.5", -0.5),
        ("1.", 1.0),
        ("6.02E+23", 6.02e23),
        ("~", None),
        ("null", None),
        ("Null", None),
        ("NULL", None),
        ("", None),
        ("true", True),
        ("True", True),
        ("FALSE", False),
        ("'1'", "1"),
        ('"1"', "1"),
        ("'true'", "true"),
        ("'~'", "~"),
        ('""', ""),
        # YAML 1.1 numbers that are plain strings in 1.2:
        ("0b11", "0b11"),
        ("1_000", "1_000"),
        ("12:30", "12:30"),
        ("-0x1", "-0x1"),
        ("0o8", "0o8"),
        ("2020-01-01", "2020-01-01"),
        ("nan", "nan"),
        ("inf", "inf"),
    ],
)
def test_plain_scalars_resolve_by_the_yaml_1_2_core_schema(written: str, expected: Any) -> None:
    value = load(f"a: {written}\n").data["a"]
    assert value == expected
    assert type(value) is type(expected), f"{written!r} resolved to {value!r}"


@pytest.mark.parametrize(("written", "sign"), [(".inf", 1), ("+.inf", 1), ("-.Inf", -1), (".INF", 1)])
def test_infinities(written: str, sign: int) -> None:
    value = load(f"a: {written}\n").data["a"]
    assert isinstance(value, float)
    assert math.isinf(value)
    assert math.copysign(1, value) == sign


@pytest.mark.parametrize("written", [".nan", ".NaN", ".NAN"])
def test_nan(written: str) -> None:
    value = load(f"a: {written}\n").data["a"]
    assert isinstance(value, float)
    assert math.isnan(value)


def test_keys_stay_the_text_that_was_written() -> None:
    data = load("1: a\ntrue: b\nnull: c\n0x10: d\n~: e\n").data
    assert list(data) == ["1", "true", "null", "0x10", "~"]


# --- merge keys ----------------------------------------------------------------------------


def test_merge_key_explicit_keys_win_whatever_their_order() -> None:
    text = "base: &base {x: 1, y: 2}\nbefore:\n  <<: *base\n  y: 3\nafter:\n  y: 4\n  <<: *base\n"
    result = load(text)
    assert plain(result.data) == {
        "base": {"x": 1, "y": 2},
        "before": {"x": 1, "y": 3},
        "after": {"y": 4, "x": 1},
    }
    assert result.duplicates == []
    before = result.data["before"]
    assert before.key_marks["y"] == Mark(4, 3)
    assert before.key_marks["x"] == Mark(1, 14)  # where the merged value was written
    assert "<<" not in before


def test_merge_key_with_a_list_earlier_sources_win() -> None:
    text = "a: &a {x: 1}\nb: &b {x: 2, z: 3}\nc:\n  <<: [*a, *b]\n  w: 0\n"
    assert plain(load(text).data["c"]) == {"x": 1, "z": 3, "w": 0}


def test_merge_key_does_not_change_the_anchor() -> None:
    data = load("a: &a {x: 1}\nb:\n  <<: *a\n  x: 2\n").data
    assert plain(data["a"]) == {"x": 1}


def test_duplicate_explicit_keys_after_a_merge_are_still_reported() -> None:
    result = load("a: &a {x: 1}\nb:\n  <<: *a\n  x: 2\n  x: 3\n")
    assert [(d.mark, d.message) for d in result.duplicates] == [
        (Mark(5, 3), "duplicate key 'x' (first written at line 4)")
    ]


@pytest.mark.parametrize("text", ["a:\n  <<: 1\n", "s: &s [1]\na:\n  <<: *s\n", "a:\n  <<: [1]\n"])
def test_merge_key_takes_only_mappings(text: str) -> None:
    err = problem(text)
    assert err.message == "a merge key (<<) takes an alias of a mapping or a list of them"


def test_quoted_merge_key_is_an_ordinary_key() -> None:
    assert plain(load("'<<': {a: 1}\n").data) == {"<<": {"a": 1}}


# --- positions -----------------------------------------------------------------------------

POSITIONS = """\
name: demo
spec:
  list:
    - a
    - {b: 1}
  flow: [x, y]
  empty:
  quoted: "q"
"""


def test_positions_of_keys_values_and_items_are_one_based() -> None:
    data = load(POSITIONS).data
    assert isinstance(data, YMap)
    assert data.mark == Mark(1, 1)
    assert data.key_marks == {"name": Mark(1, 1), "spec": Mark(2, 1)}
    assert data.value_marks == {"name": Mark(1, 7), "spec": Mark(3, 3)}

    spec = data["spec"]
    assert isinstance(spec, YMap)
    assert spec.mark == Mark(3, 3)
    assert spec.key_marks == {
        "list": Mark(3, 3),
        "flow": Mark(6, 3),
        "empty": Mark(7, 3),
        "quoted": Mark(8, 3),
    }
    assert spec.value_marks["list"] == Mark(4, 5)
    assert spec.value_marks["flow"] == Mark(6, 9)
    assert spec.value_marks["quoted"] == Mark(8, 11)
    assert spec["empty"] is None

    block, flow = spec["list"], spec["flow"]
    assert isinstance(block, YSeq)
    assert isinstance(flow, YSeq)
    assert block.item_marks == [Mark(4, 7), Mark(5, 7)]
    assert flow.item_marks == [Mark(6, 10), Mark(6, 13)]
    inner = block[1]
    assert isinstance(inner, YMap)
    assert (inner.mark, inner.key_marks, inner.value_marks) == (
        Mark(5, 7),
        {"b": Mark(5, 8)},
        {"b": Mark(5, 11)},
    )


def test_positions_count_characters_not_bytes() -> None:
    data = load("é: ☕\nb: [x, ü]\n".encode()).data
    assert data.value_marks["é"] == Mark(1, 4)
    assert data["b"].item_marks == [Mark(2, 5), Mark(2, 8)]


# --- round trip property -------------------------------------------------------------------

# PyYAML's dumper writes YAML 1.1: it quotes a string that 1.1 would read as another type
# but writes 1.2-only numbers (`1e3`, `0o7`, `09`) plain, which this YAML 1.2 loader reads as
# numbers. Strings here never start like a number, so both YAML versions agree on them.
_NUMBERISH = re.compile(r"^[-+.0-9]")
safe_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Co", "Cn")),
    max_size=20,
).filter(lambda s: not _NUMBERISH.match(s) and "\ufeff" not in s)
scalars = st.one_of(safe_text, st.integers(min_value=-(2**70), max_value=2**70), st.booleans())
documents = st.dictionaries(
    safe_text,
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(safe_text, inner, max_size=4),
        max_leaves=12,
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_safe_dump_output_loads_back_equal(data: dict[str, Any]) -> None:
    for flow in (False, True):
        text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
        assert plain(load(text).data) == data, text
