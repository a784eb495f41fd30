"""Kubernetes resource quantities (8, 500m, 64Gi) as exact numbers, and back."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from trainops.errors import InputError

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E)?$")
_BINARY = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
_DECIMAL = ("E", "P", "T", "G", "M", "k")


def parse(value: int | str) -> Fraction:
    if isinstance(value, int):
        return Fraction(value)
    match = _RE.match(value)
    if match is None:
        raise InputError(f"{value!r} is not a quantity such as 8, 500m or 64Gi")
    return Fraction(match.group(1)) * _SUFFIX[match.group(2) or ""]


def fmt(value: Fraction, *, like: tuple[int | str, ...] = ()) -> int | str:
    """A quantity as Kubernetes writes it; binary suffixes when the inputs used them."""
    if value < 0:
        raise InputError(f"negative quantity {float(value)}")
    if value.denominator != 1:
        millis = value * 1000
        return f"{math.ceil(millis)}m"
    whole = int(value)
    binary = any(isinstance(v, str) and v.endswith("i") for v in like)
    decimal = any(isinstance(v, str) and v[-1:] in "kMGTPE" for v in like)
    for suffixes in ((_BINARY,) if binary else ()) + ((_DECIMAL,) if decimal else ()):
        for suffix in suffixes:
            unit = int(_SUFFIX[suffix])
            if whole and whole % unit == 0:
                return f"{whole // unit}{suffix}"
    return whole if all(isinstance(v, int) for v in like) else str(whole)


_SI = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""), (-3, "m"), (-6, "u"), (-9, "n"))


def canonical(value: int | str) -> str:
    """The quantity as the API server's Go types write it back (resource.Quantity's canonical
    form): binary suffixes for a binary input of at least 1Ki that has one (1.5Gi → 1536Mi),
    else the largest SI suffix that leaves a whole number (1000 → 1k, 0.5 → 500m). What a
    webhook round-trips through Go comes back so: rendering it so keeps a re-apply unchanged."""
    number = parse(value)
    if number == 0:
        return "0"
    if isinstance(value, str) and value.endswith("i") and number.denominator == 1 and number >= 1024:
        whole = int(number)
        for suffix in _BINARY:
            unit = int(_SUFFIX[suffix])
            if whole % unit == 0:
                return f"{whole // unit}{suffix}"
        return str(whole)
    for exponent, suffix in _SI:
        scaled = number / Fraction(10) ** exponent
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(number * 10**9)}n"


def mebibytes(value: int | str) -> int:
    """Whole MiB, rounded up (Slurm's --mem=<n>M)."""
    return math.ceil(parse(value) / 2**20)


def whole_cpus(value: int | str) -> int:
    """Whole CPUs, rounded up (Slurm's --cpus-per-task)."""
    return math.ceil(parse(value))
