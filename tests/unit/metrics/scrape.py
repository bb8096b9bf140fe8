"""Reading an exposition as a scraper does: family name -> (type, samples)."""

from __future__ import annotations

from dataclasses import dataclass

from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.metrics_text import render as exposition


@dataclass(frozen=True)
class Family:
    type: str
    samples: list[tuple[str, dict[str, str], float]]


def scrape(registry: CollectorRegistry) -> dict[str, Family]:
    """Parsed from the text exactly as served (the TYPE lines name the families)."""
    families: dict[str, Family] = {}
    current = ""
    for line in exposition(registry).decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            current = name
            families[name] = Family(kind, [])
        elif line and not line.startswith("#"):
            families[current].samples.append(_sample(line))
    return families


def _sample(line: str) -> tuple[str, dict[str, str], float]:
    head, _, value = line.rpartition(" ")
    name, _, rest = head.partition("{")
    labels: dict[str, str] = {}
    for part in rest.rstrip("}").split('",') if rest else []:
        k, _, v = part.partition("=")
        labels[k] = v.strip('"')
    return name, labels, float(value)


def value(registry: CollectorRegistry, sample: str, **labels: str) -> float | None:
    for family in scrape(registry).values():
        for name, have, v in family.samples:
            if name == sample and have == labels:
                return v
    return None
