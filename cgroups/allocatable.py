"""Node allocatable (upstream cm/node_container_manager_linux.go): capacity minus reservations."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from minikubelet.base.quantity import parse_percentage, parse_quantity, percentage_of

# Hard eviction signals that reserve a node resource, and which resource.
_EVICTION_SIGNAL_RESOURCE = {
    "memory.available": "memory",
    "nodefs.available": "ephemeral-storage",
}


def parse_resource_list(raw: Mapping[str, object]) -> dict[str, Fraction]:
    return {name: parse_quantity(value) for name, value in raw.items()}


def hard_eviction_reservation(
    eviction_hard: Mapping[str, str], capacity: Mapping[str, Fraction]
) -> dict[str, Fraction]:
    """What the hard eviction thresholds hold back, per resource (upstream cm hardEvictionReservation with
    GetThresholdQuantity: "10%" is a float32 fraction of capacity, so 10% of 52521566208 is 5252156699)."""
    result: dict[str, Fraction] = {}
    for signal, threshold in eviction_hard.items():
        resource = _EVICTION_SIGNAL_RESOURCE.get(signal)
        if resource is None or resource not in capacity:
            continue
        text = threshold.strip()
        if text.endswith("%"):
            value = Fraction(percentage_of(capacity[resource], parse_percentage(text)))
        else:
            value = parse_quantity(text)
        result[resource] = result.get(resource, Fraction(0)) + value
    return result


def subtract(capacity: Mapping[str, Fraction], *reservations: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """capacity minus every reservation, per resource, never below zero."""
    result: dict[str, Fraction] = {}
    for name, value in capacity.items():
        for reserved in reservations:
            value -= reserved.get(name, Fraction(0))
        result[name] = max(value, Fraction(0))
    return result
