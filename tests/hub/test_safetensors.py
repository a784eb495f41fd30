"""The safetensors header reader: real files written by the safetensors library, truncated
files, and hostile headers (huge lengths, bad JSON, offsets past the end, overlaps, lying
shapes). Every bad file is one InputError naming it; reads stay within 8 + header bytes."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from trainops.errors import InputError
from trainops.modelfiles.safetensors import MAX_HEADER, model_info, param_size, read_file_header, read_header


def write_raw(path: Path, header: dict[str, Any] | bytes, data: bytes = b"", length: int | None = None) -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)
    return path


class CountingReader:
    """read_at over bytes that records every range asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.asked: list[tuple[int, int]] = []

    def __call__(self, offset: int, length: int) -> bytes:
        self.asked.append((offset, length))
        return self.data[offset : offset + length]


def test_a_real_file_written_by_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_file(
        {"embed": np.zeros((10, 4), np.float32), "norm": np.ones(4, np.float16), "ids": np.arange(3, dtype=np.int64)},
        str(path),
        metadata={"format": "np", "vocab": "abc"},
    )
    header = read_file_header(path)
    assert header.parameter_count == 40 + 4 + 3
    assert header.dtypes == {"F32": 40, "F16": 4, "I64": 3}
    assert header.metadata == {"format": "np", "vocab": "abc"}
    assert header.tensors["embed"].shape == (10, 4) and header.tensors["embed"].dtype == "F32"
    assert header.size == path.stat().st_size


def test_only_the_length_and_the_header_are_read(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    save_file({"w": np.zeros((256, 1024), np.float32)}, str(path))  # 1 MiB of tensor data
    data = path.read_bytes()
    reader = CountingReader(data)
    header = read_header(reader, size=len(data), name="big.safetensors")
    assert reader.asked == [(0, 8), (8, header.header_size)]
    assert sum(length for _, length in reader.asked) < 1024


def test_a_huge_header_length_is_refused_without_reading_it(tmp_path: Path) -> None:
    reader = CountingReader(struct.pack("<Q", 2**63) + b"{}")
    with pytest.raises(InputError, match=r"hostile\.safetensors: .*exceeds the 104857600-byte limit"):
        read_header(reader, size=10**15, name="hostile.safetensors")
    assert reader.asked == [(0, 8)]
    reader = CountingReader(struct.pack("<Q", MAX_HEADER + 1))
    with pytest.raises(InputError, match="exceeds"):
        read_header(reader, size=2 * MAX_HEADER, name="x")
    assert reader.asked == [(0, 8)]


@pytest.mark.parametrize(
    ("header", "data", "length", "message"),
    [
        (b"{not json", b"", None, "the header is not JSON"),
        (b"\xff\xfe{}", b"", None, "the header is not JSON"),
        (b"[1, 2]", b"", None, "is a JSON list, not an object"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"", None, "past the end of the data"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, 10**6, "does not fit in the file"),
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
            b"\0" * 12,
            None,
            "overlaps the previous tensor",
        ),
        ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, None, "leaves a gap"),
        ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "needs 12 bytes"),
        ({"w": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "unknown dtype 'F33'"),
        ({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "non-negative integers"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8, None, "begin <= end"),
        ({"w": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, None, "exactly dtype, shape and data_offsets"),
        ({"__metadata__": {"k": 1}}, b"", None, "must map strings to strings"),
        (
            b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
            b'"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
            b"\0" * 4,
            None,
            "names 'w' twice",
        ),
        ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 9, None, "cover 4 of the 9"),
    ],
)
def test_hostile_headers_are_one_clean_error(
    tmp_path: Path, header: dict[str, Any] | bytes, data: bytes, length: int | None, message: str
) -> None:
    path = write_raw(tmp_path / "bad.safetensors", header, data, length)
    with pytest.raises(InputError) as err:
        read_file_header(path)
    text = str(err.value)
    assert text.startswith(f"{path}: not a valid safetensors file") and message in text
    assert "\n" not in text


def test_truncated_files(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    save_file({"w": np.zeros(100, np.float32)}, str(path))
    data = path.read_bytes()
    for cut in (0, 5, 8, 20, len(data) - 1):
        short = tmp_path / f"cut{cut}.safetensors"
        short.write_bytes(data[:cut])
        with pytest.raises(InputError, match=f"cut{cut}.safetensors: not a valid safetensors file"):
            read_file_header(short)


def test_model_info_of_a_directory(tmp_path: Path) -> None:
    bf16 = {"w": {"dtype": "BF16", "shape": [1000, 1000], "data_offsets": [0, 2_000_000]}}
    write_raw(tmp_path / "model-00001.safetensors", bf16, b"\0" * 2_000_000)
    save_file({"norm": np.ones(500, np.float32)}, str(tmp_path / "model-00002.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    info = model_info(tmp_path)
    assert (info.format, info.precision, info.architecture) == ("safetensors", "bf16", "LlamaForCausalLM")
    assert info.parameter_count == 1_000_500 and info.param_size == "1m"
    assert info.as_config() == {
        "architecture": "LlamaForCausalLM",
        "format": "safetensors",
        "paramSize": "1m",
        "precision": "bf16",
    }


def test_model_info_without_safetensors(tmp_path: Path) -> None:
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 10)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    info = model_info(tmp_path)
    assert (info.format, info.precision, info.param_size, info.architecture) == ("pytorch", None, None, "gpt2")
    (tmp_path / "config.json").write_text("{broken")
    assert model_info(tmp_path).architecture is None


@pytest.mark.parametrize(
    ("count", "text"),
    [(6_700_000_000, "6.7b"), (124_439_808, "124.4m"), (1_000_000_000_000, "1t"), (2056, "2.1k"), (40, "0.1k")],
)
def test_param_size(count: int, text: str) -> None:
    assert param_size(count) == text
