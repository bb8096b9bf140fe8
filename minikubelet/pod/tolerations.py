"""Taints and tolerations (k8s.io/api core/v1 Toleration.ToleratesTaint, component-helpers
FindMatchingUntoleratedTaint). Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from minikubelet.node.labels import Taint
from minikubelet.pod.node_affinity import parse_int64


def tolerates(toleration: Mapping[str, Any], taint: Taint, comparison_operators: bool = False) -> bool:
    """An empty effect matches every effect, an empty key (with Exists) every key; the operator defaults
    to Equal. Lt/Gt compare integers, only with the TaintTolerationComparisonOperators gate."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    op = toleration.get("operator") or ""
    value = toleration.get("value") or ""
    if op in ("", "Equal"):
        return bool(value == taint.value)
    if op == "Exists":
        return True
    if op in ("Lt", "Gt") and comparison_operators:
        want, have = parse_int64(str(value)), parse_int64(taint.value)
        if want is None or have is None:
            return False
        return have < want if op == "Lt" else have > want
    return False


def find_untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Mapping[str, Any]],
                           include: Callable[[Taint], bool], comparison_operators: bool = False) -> Taint | None:
    """The first taint passing `include` that no toleration tolerates, or None."""
    tols = [t for t in tolerations if isinstance(t, Mapping)]
    for taint in taints:
        if include(taint) and not any(tolerates(t, taint, comparison_operators) for t in tols):
            return taint
    return None
