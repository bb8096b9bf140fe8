"""Kubernetes resource quantities ("100m", "64Mi", "1e3", "0.5") as exact fractions."""

from __future__ import annotations

import functools
import math
import re
import struct
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity the way the API server does; raises QuantityError on anything else."""
    if type(value) is str:
        return _parse_text(value)
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity {value!r} is not finite")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string or number, got {type(value).__name__}")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """Cached: a pod's few quantity strings are parsed again at every sync (a Fraction is immutable)."""
    m = _QUANTITY.match(value.strip())
    if not m or value != value.strip():
        raise QuantityError(f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}")
    number = Fraction(m.group(1))
    if m.group(2):
        exponent = int(m.group(2)[1:])
        if abs(exponent) > 60:
            raise QuantityError(f"quantity {value!r} is out of range")
        return number * Fraction(10) ** exponent
    suffix = m.group(3) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def to_millicores(value: object) -> int:
    """CPU quantity -> millicores, rounded up like resource.Quantity.MilliValue."""
    return math.ceil(parse_quantity(value) * 1000)


def to_bytes(value: object) -> int:
    """Memory quantity -> bytes, rounded up like resource.Quantity.Value."""
    return math.ceil(parse_quantity(value))


_DECIMAL_UP = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0), ("m", -3), ("u", -6), ("n", -9))
_BINARY_UP = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")


def format_quantity(value: Fraction, binary: bool = False) -> str:
    """A quantity's canonical string, as resource.Quantity.String prints it: binary (`64Mi`) for a whole
    number of bytes of at least 1024 in BinarySI, otherwise the largest decimal suffix that keeps an
    integer mantissa (`100m`, `2`, `1k`); below a nano it is rounded up to one, as Quantity does."""
    if type(value) is Fraction:
        return _format_fraction(value, bool(binary))
    return _format(value, binary)


@functools.lru_cache(maxsize=4096)
def _format_fraction(value: Fraction, binary: bool) -> str:
    """Cached: every status renders the same few requests and limits again."""
    return _format(value, binary)


def _format(value: Fraction, binary: bool) -> str:
    if value == 0:
        return "0"
    if binary and value.denominator == 1 and abs(value) >= 1024:
        for suffix in _BINARY_UP:
            unit = _BINARY[suffix]
            if value % unit == 0:
                return f"{value // unit}{suffix}"
        return str(value.numerator)
    for suffix, exponent in _DECIMAL_UP:
        scaled = value / Fraction(10) ** exponent
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(value * 10**9)}n"


def is_binary(text: object) -> bool:
    """Whether a quantity was written with a binary suffix (Ki … Ei): its sums keep that format."""
    return isinstance(text, str) and text.endswith(tuple(_BINARY))


def float32(x: float) -> float:
    """x rounded to a Go float32 (one rounding of a float64 operation on float32s is exact, as Go's)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def parse_percentage(text: str) -> float:
    """Upstream eviction parsePercentage: "10%" -> float32(10) / 100, a float32 (0.100000001490116…), which
    shows in every quantity taken of a capacity. Raises ValueError on a bad number."""
    return float32(float32(float(text.rstrip("%"))) / 100)


def percentage_of(capacity: Fraction, percentage: float) -> int:
    """Upstream GetThresholdQuantity: int64(float64(capacity.Value()) * float64(percentage)), truncated."""
    return math.trunc(float(math.ceil(capacity)) * percentage)
