"""A scrape parsed into families, compared with the recorded v1.36 kubelet families
(tests/fixtures/metrics/kubelet-v1.36-metrics.tsv) and evaluated against the kubernetes-mixin selectors
(tests/fixtures/metrics/kubernetes-mixin-kubelet.tsv)."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
# labels Prometheus adds to every series of a target; the mixin's selectors on them are left out of the fixture
TARGET_LABELS = ("job", "cluster", "instance")


@dataclass
class Family:
    name: str
    type: str
    series: list[dict[str, str]] = field(default_factory=list)
    buckets: set[str] = field(default_factory=set)

    @property
    def label_names(self) -> set[str]:
        return {k for s in self.series for k in s if k not in ("le", "quantile")}


@dataclass
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def parse(text: str) -> tuple[dict[str, Family], list[Sample]]:
    """Families by their `# TYPE` name, and every sample."""
    families: dict[str, Family] = {}
    samples: list[Sample] = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = Family(name, kind)
            continue
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ValueError(f"not an exposition line: {line!r}")
        name, raw, value = m.groups()
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in _LABEL.findall(raw or "")}
        samples.append(Sample(name, labels, float(value)))
        family = families.get(name) or next((families[name[: -len(sfx)]] for sfx in ("_bucket", "_sum", "_count")
                                             if name.endswith(sfx) and name[: -len(sfx)] in families), None)
        if family is None:
            raise ValueError(f"sample {name} without a # TYPE line")
        family.series.append(labels)
        if name.endswith("_bucket") and "le" in labels:
            family.buckets.add(labels["le"])
    return families, samples


@dataclass(frozen=True)
class Reference:
    family: str
    type: str
    labels: frozenset[str]
    buckets: tuple[float, ...]
    endpoint: str
    owner: str
    status: str

    @property
    def served(self) -> bool:
        return self.status == "served"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t"))


def reference() -> dict[str, Reference]:
    out = {}
    for row in _rows(FIXTURES / "kubelet-v1.36-metrics.tsv"):
        out[row["family"]] = Reference(
            row["family"], row["type"], frozenset(x for x in row["labels"].split(",") if x),
            tuple(float(b) for b in row["buckets"].split(",") if b), row["endpoint"], row["owner"], row["status"])
    return out


@dataclass(frozen=True)
class Selector:
    source: str
    where: str
    series: str
    matchers: tuple[tuple[str, str, str], ...]
    endpoint: str
    reads: str
    needs: str
    status: str

    def text(self) -> str:
        inner = ",".join(f'{k}{op}"{v}"' for k, op, v in self.matchers)
        return f"{self.series}{{{inner}}}"


def selectors() -> list[Selector]:
    return [Selector(r["source"], r["where"], r["series"], tuple(_MATCHER.findall(r["matchers"])), r["endpoint"],
                     r["reads"], r["needs"], r["status"]) for r in _rows(FIXTURES / "kubernetes-mixin-kubelet.tsv")]


def matches(selector: Selector, sample: Sample) -> bool:
    """PromQL's matching of one sample (regexes fully anchored); the target's own labels are not ours to check."""
    if sample.name != selector.series:
        return False
    for name, op, value in selector.matchers:
        if name in TARGET_LABELS:
            continue
        have = sample.labels.get(name, "")
        ok = {"=": have == value, "!=": have != value,
              "=~": re.fullmatch(value, have) is not None, "!~": re.fullmatch(value, have) is None}[op]
        if not ok:
            return False
    return True


def bucket_bounds(family: Family) -> tuple[float, ...]:
    return tuple(sorted(float(b) for b in family.buckets if b != "+Inf"))


def compare(scraped: dict[str, Family], endpoint: str, event_only: frozenset[str]) -> list[str]:
    """What differs from the reference for `endpoint`: a served family missing (unless it needs an event the
    scrape did not see), a family outside the reference (minikubelet_* excepted) or marked n/a, a type, the label
    names or the buckets."""
    ref = {n: r for n, r in reference().items() if r.endpoint == endpoint}
    problems = []
    for name, row in sorted(ref.items()):
        if row.served and name not in scraped and name not in event_only:
            problems.append(f"missing {name} [{row.owner}]")
    for name, fam in sorted(scraped.items()):
        if name.startswith("minikubelet_"):
            continue
        r = ref.get(name)
        if r is None:
            problems.append(f"outside the reference: {name}")
            continue
        if not r.served:
            problems.append(f"served but marked '{r.status}': {name} [{r.owner}]")
        if fam.type != r.type:
            problems.append(f"{name}: type {fam.type}, upstream {r.type} [{r.owner}]")
        if fam.series and fam.label_names != r.labels:
            problems.append(f"{name}: labels {sorted(fam.label_names)}, upstream {sorted(r.labels)} [{r.owner}]")
        bounds, upstream = bucket_bounds(fam), tuple(sorted(r.buckets))
        same = len(bounds) == len(upstream) and all(
            math.isclose(a, b, rel_tol=1e-9) for a, b in zip(bounds, upstream, strict=True))
        if r.type == "histogram" and fam.buckets and not same:
            problems.append(f"{name}: buckets {bounds}, upstream {upstream} [{r.owner}]")
    return problems
