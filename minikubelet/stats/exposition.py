"""Prometheus text exposition format 0.0.4 as Go's client_golang (expfmt) writes it.

Written here rather than with prometheus_client because the bytes differ where scrapers do not care but the
recordings do: Go formats floats with strconv 'g' shortest (`0`, `249856`, `4.16192512e+09`, where Python's
client writes `0.0`, `249856.0`), and timestamps in milliseconds follow the value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"


def go_float(value: float) -> str:
    """strconv.FormatFloat(v, 'g', -1, 64) with Prometheus' spellings of the specials: the shortest digits that
    read back exactly (Python's repr finds the same ones), in exponent form when the exponent is < -4 or >= 6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    negative, digit_tuple, exponent = Decimal(repr(float(value))).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    exp10 = len(digits) + exponent - 1  # the exponent of the first digit
    sign = "-" if negative else ""
    if exp10 < -4 or exp10 >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if exp10 >= 0:
        whole = digits[: exp10 + 1].ljust(exp10 + 1, "0")
        frac = digits[exp10 + 1:]
        return sign + whole + ("." + frac if frac else "")
    return sign + "0." + "0" * (-exp10 - 1) + digits


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class Family:
    name: str
    help: str
    type: str  # "counter" | "gauge"
    samples: list[tuple[Sequence[tuple[str, str]], float, int | None]] = field(default_factory=list)

    def add(self, labels: Iterable[tuple[str, str]], value: float, timestamp_ms: int | None = None) -> None:
        self.samples.append((sorted(labels), value, timestamp_ms))


def render(families: Iterable[Family]) -> str:
    """Families by name, samples by their label values, as the Go registry gathers them."""
    out: list[str] = []
    for fam in sorted(families, key=lambda f: f.name):
        if not fam.samples:
            continue
        out.append(f"# HELP {fam.name} {fam.help.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}\n")
        out.append(f"# TYPE {fam.name} {fam.type}\n")
        for labels, value, ts in sorted(fam.samples, key=lambda s: [v for _, v in s[0]]):
            text = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
            line = fam.name + ("{" + text + "}" if text else "") + " " + go_float(value)
            out.append(line + (f" {ts}\n" if ts is not None else "\n"))
    return "".join(out)
