"""Required node affinity (component-helpers/scheduling/corev1/nodeaffinity GetRequiredNodeAffinity).

`spec.nodeSelector` AND `requiredDuringSchedulingIgnoredDuringExecution`: its terms are OR-ed, a term's
expressions AND-ed; empty terms are skipped (so only empty terms match nothing); a term with an invalid
requirement never matches. `matchFields` know one field, `metadata.name`. Preferred terms are the
scheduler's scoring and ignored here. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from minikubelet.api.names import label_value_errors, qualified_name_errors
from minikubelet.node.labels import Node

_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64)."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _values(expr: Mapping[str, Any]) -> list[str] | None:
    raw = expr.get("values") or []
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        return None
    return raw


def _label_requirement_valid(key: str, op: str, values: list[str]) -> bool:
    """labels.NewRequirement's checks."""
    if qualified_name_errors(key) or any(label_value_errors(v) for v in values):
        return False
    if op in ("In", "NotIn"):
        return bool(values)
    if op in ("Exists", "DoesNotExist"):
        return not values
    if op in ("Gt", "Lt"):
        return len(values) == 1 and parse_int64(values[0]) is not None
    return False


def _label_requirement_matches(key: str, op: str, values: list[str], labels: Mapping[str, str]) -> bool:
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if not present:
        return False
    have, want = parse_int64(labels[key]), parse_int64(values[0])
    if have is None or want is None:
        return False
    return have > want if op == "Gt" else have < want


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    """A parsed nodeSelectorTerm: every expression and every field requirement must hold."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return False
    parsed: list[tuple[str, str, list[str]]] = []
    for expr in expressions:
        values = _values(expr) if isinstance(expr, dict) else None
        if values is None:
            return False
        key, op = str(expr.get("key", "")), str(expr.get("operator", ""))
        if not _label_requirement_valid(key, op, values):
            return False
        parsed.append((key, op, values))
    field_reqs: list[tuple[str, str, str]] = []
    for expr in fields:
        values = _values(expr) if isinstance(expr, dict) else None
        op = str(expr.get("operator", "")) if isinstance(expr, dict) else ""
        if values is None or op not in ("In", "NotIn") or len(values) != 1:
            return False
        field_reqs.append((str(expr.get("key", "")), op, values[0]))
    if not all(_label_requirement_matches(k, op, v, node.labels) for k, op, v in parsed):
        return False
    node_fields = {"metadata.name": node.name} if node.name else {}
    if field_reqs and node_fields:
        for key, op, value in field_reqs:
            equal = node_fields.get(key, "") == value
            if equal != (op == "In"):
                return False
    return True


def _is_empty_term(term: object) -> bool:
    return not isinstance(term, dict) or (not term.get("matchExpressions") and not term.get("matchFields"))


def required_node_affinity_matches(spec: Mapping[str, Any], node: Node) -> bool:
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and any(node.labels.get(k) != v or k not in node.labels
                                          for k, v in selector.items()):
        return False
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") \
        if isinstance(node_affinity, dict) else None
    if not isinstance(required, dict):
        return True
    terms = required.get("nodeSelectorTerms") or []
    if not isinstance(terms, list):
        return False
    return any(_term_matches(t, node) for t in terms if not _is_empty_term(t))


MAX_TERMS = 5


def node_affinity_mismatch(spec: Mapping[str, Any], node: Node) -> dict[str, Any]:
    """Why `required_node_affinity_matches` said no, as fields: the nodeSelector pairs the node's labels do not
    hold (with the node's value, None when it has no such label), else the required terms none of which matched
    (the first `MAX_TERMS`)."""
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        unmatched = [{"key": str(k), "value": str(v), "nodeValue": node.labels.get(str(k))}
                     for k, v in selector.items() if node.labels.get(str(k)) != v]
        if unmatched:
            return {"nodeSelector": unmatched}
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") \
        if isinstance(node_affinity, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    listed = [t for t in terms if isinstance(t, dict)] if isinstance(terms, list) else []
    return {"nodeSelectorTerms": listed[:MAX_TERMS], "nodeLabels": dict(node.labels)}
