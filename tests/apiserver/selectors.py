"""Field and label selectors of list and watch requests."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.apiserver import errors

Json = dict[str, Any]
Predicate = Callable[[Json], bool]

# The fields each resource can be selected by (its registry's GetAttrs / field label conversion).
_FIELDS: dict[str, tuple[str, ...]] = {
    "pods": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "nodes": ("spec.unschedulable",),
    "events": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
               "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
               "reason", "reportingComponent", "source", "type"),
    "secrets": ("type",),
    "services": ("spec.clusterIP", "spec.type"),
    "certificatesigningrequests": ("spec.signerName",),
}
_REQUIREMENT = re.compile(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$")
_SET = re.compile(r"^\s*([^\s!=(]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _field_value(obj: Json, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_selector(resource: str, selector: str) -> tuple[Predicate, dict[str, str]]:
    """A predicate, and the `field=value` equalities (the Node authorizer reads those)."""
    if not selector:
        return (lambda _o: True), {}
    terms: list[tuple[str, bool, str]] = []
    for raw in selector.split(","):
        m = _REQUIREMENT.match(raw)
        if not m:
            raise errors.bad_request(f'invalid selector: \'{selector}\'; can\'t understand \'{raw}\'')
        key, op, value = m.groups()
        if key not in ("metadata.name", "metadata.namespace", *_FIELDS.get(resource, ())):
            raise errors.bad_request(f'field label not supported: {key}')
        terms.append((key, op != "!=", value))
    equal = {k: v for k, eq, v in terms if eq}
    return (lambda o: all((_field_value(o, k) == v) == eq for k, eq, v in terms)), equal


def _split_terms(selector: str) -> list[str]:
    out: list[str] = []
    depth, cur = 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [t for t in out if t.strip()]


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # in, notin, exists, !exists
    values: frozenset[str] = frozenset()

    def holds(self, labels: dict[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        found = self.key in labels and labels[self.key] in self.values
        return found if self.op == "in" else not found


def _requirement(term: str) -> _Requirement:
    if m := _SET.match(term):
        key, op, raw = m.groups()
        return _Requirement(key, op, frozenset(v.strip() for v in raw.split(",")))
    if m := _REQUIREMENT.match(term):
        key, op, value = m.groups()
        return _Requirement(key, "notin" if op == "!=" else "in", frozenset({value}))
    bare = term.strip()
    if bare.startswith("!") and re.fullmatch(r"[\w./-]+", bare[1:].strip()):
        return _Requirement(bare[1:].strip(), "!exists")
    if re.fullmatch(r"[\w./-]+", bare):
        return _Requirement(bare, "exists")
    raise errors.bad_request(f"unable to parse requirement: {term!r}")


def label_selector(selector: str) -> Predicate:
    requirements = [_requirement(term) for term in _split_terms(selector)]

    def matches(obj: Json) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.holds(labels) for r in requirements)

    return matches
