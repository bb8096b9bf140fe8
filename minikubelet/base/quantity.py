"""Kubernetes resource quantities ("100m", "64Mi", "1e3", "0.5") as exact fractions."""

from __future__ import annotations

import math
import re
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
