"""Units shown to people: one size family (KiB, MiB, GiB, TiB) everywhere trainops prints a size;
natural order for names with numbers (tags such as step-N); long references folded between
their parts for a narrow screen."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"([0-9]+)")
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_size(n: int | float) -> str:
    """``n`` bytes in binary units: ``512 B``, ``1.5 KiB``, ``200.0 MiB``, ``1.0 GiB``."""
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders digit runs by value: ``step-600`` before ``step-1000``."""
    parts: list[tuple[int, int | str]] = []
    for chunk in _DIGITS.split(text):
        if chunk.isdigit():
            parts.append((0, int(chunk)))
        elif chunk:
            parts.append((1, chunk))
    return tuple(parts)


def fold_reference(text: str, width: int) -> str:
    """text folded onto lines of at most width characters, each line of text broken after a
    `/`, `:` or space (a reference folds between its parts, never mid-name); a part longer
    than width alone is cut."""
    out: list[str] = []
    for line in text.split("\n"):
        current = ""
        for part in re.findall(r"[^/: ]*(?::/+|[/: ])?", line):  # "scheme://" stays whole
            if current and len(current) + len(part.rstrip()) > width:
                out.append(current.rstrip())
                current = ""
            while len(part) > width:
                out.append(part[:width])
                part = part[width:]
            current += part
        out.append(current.rstrip())
    return "\n".join(out)
