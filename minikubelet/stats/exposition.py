"""Prometheus text exposition format 0.0.4 as Go's client_golang (expfmt) writes it.

Written here rather than with prometheus_client because the bytes differ where scrapers do not care but the
recordings do: Go formats floats with strconv 'g' shortest (`0`, `249856`, `4.16192512e+09`, where Python's
client writes `0.0`, `249856.0`), and timestamps in milliseconds follow the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from minikubelet.metrics_text import escape_label, go_float

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"


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
