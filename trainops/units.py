"""Units shown to people: one size family (KiB, MiB, GiB, TiB) everywhere trainops prints a size."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_size(n: int | float) -> str:
    """``n`` bytes in binary units: ``512 B``, ``1.5 KiB``, ``200.0 MiB``, ``1.0 GiB``."""
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
