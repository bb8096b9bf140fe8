"""Eviction thresholds (upstream eviction/api and the threshold half of eviction/helpers.go). Pure.

A threshold is "signal < value", the value a quantity or a fraction of the signal's capacity. Soft
thresholds carry a grace period the signal must stay below the value for; hard ones (grace 0) act at
once. A minimum reclaim raises the bar for leaving the met state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from minikubelet.base.quantity import format_quantity, is_binary, parse_percentage, parse_quantity, percentage_of
from minikubelet.config.kubelet_config import parse_duration

MEMORY_AVAILABLE = "memory.available"
ALLOCATABLE_MEMORY_AVAILABLE = "allocatableMemory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
CONTAINERFS_AVAILABLE = "containerfs.available"
CONTAINERFS_INODES_FREE = "containerfs.inodesFree"
PID_AVAILABLE = "pid.available"

MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"

RESOURCE_MEMORY = "memory"
RESOURCE_EPHEMERAL_STORAGE = "ephemeral-storage"
RESOURCE_INODES = "inodes"
RESOURCE_PIDS = "pids"

SIGNAL_CONDITION: Mapping[str, str] = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE, ALLOCATABLE_MEMORY_AVAILABLE: MEMORY_PRESSURE,
    IMAGEFS_AVAILABLE: DISK_PRESSURE, CONTAINERFS_AVAILABLE: DISK_PRESSURE, NODEFS_AVAILABLE: DISK_PRESSURE,
    IMAGEFS_INODES_FREE: DISK_PRESSURE, NODEFS_INODES_FREE: DISK_PRESSURE, CONTAINERFS_INODES_FREE: DISK_PRESSURE,
    PID_AVAILABLE: PID_PRESSURE,
}
SIGNAL_RESOURCE: Mapping[str, str] = {
    MEMORY_AVAILABLE: RESOURCE_MEMORY, ALLOCATABLE_MEMORY_AVAILABLE: RESOURCE_MEMORY,
    IMAGEFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE, IMAGEFS_INODES_FREE: RESOURCE_INODES,
    CONTAINERFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE, CONTAINERFS_INODES_FREE: RESOURCE_INODES,
    NODEFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE, NODEFS_INODES_FREE: RESOURCE_INODES,
    PID_AVAILABLE: RESOURCE_PIDS,
}
# Quantities of these signals print in BinarySI, as upstream's observations (the rest are DecimalSI counts).
_BYTE_SIGNALS = frozenset({MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE, NODEFS_AVAILABLE, IMAGEFS_AVAILABLE,
                           CONTAINERFS_AVAILABLE})


class ThresholdError(ValueError):
    """A threshold statement upstream's ParseThresholdConfig refuses."""


@dataclass(frozen=True)
class Value:
    """Exactly one of `quantity` (with the text it was written as, for printing) or `percentage` (0..1)."""

    quantity: Fraction | None = None
    text: str = ""
    percentage: float = 0.0

    def amount(self, capacity: int) -> int:
        """GetThresholdQuantity: the quantity, or int64(capacity * percentage) truncated."""
        if self.quantity is not None:
            return math.ceil(self.quantity)
        return percentage_of(Fraction(capacity), self.percentage)

    def format(self, capacity: int) -> str:
        if self.quantity is not None:
            return format_quantity(self.quantity, binary=is_binary(self.text))
        return format_quantity(Fraction(self.amount(capacity)), binary=True)


@dataclass(frozen=True)
class Threshold:
    signal: str
    value: Value
    grace_period: float = 0.0  # seconds; 0: a hard threshold
    min_reclaim: Value | None = None

    @property
    def hard(self) -> bool:
        return self.grace_period == 0

    def describe(self) -> str:
        v = self.value.text or f"{self.value.percentage * 100:g}%"
        return f"{self.signal}<{v}" + (f" (grace {self.grace_period:g}s)" if self.grace_period else "")


def _percentage(text: str) -> float:
    try:
        return parse_percentage(text)
    except ValueError:
        raise ThresholdError(f"invalid percentage {text!r}") from None


def parse_threshold(signal: str, text: str) -> Threshold | None:
    """One `signal: value` statement; None for 0% and 100%, which upstream ignores."""
    if signal not in SIGNAL_RESOURCE:
        raise ThresholdError(f"unsupported eviction signal {signal}")
    if text.endswith("%"):
        if text in ("0%", "100%"):
            return None
        pct = _percentage(text)
        if pct < 0:
            raise ThresholdError(f"eviction percentage threshold {signal} must be >= 0%: {text}")
        if pct > 1:
            raise ThresholdError(f"eviction percentage threshold {signal} must be <= 100%: {text}")
        return Threshold(signal, Value(percentage=pct))
    qty = parse_quantity(text)
    if qty <= 0:
        raise ThresholdError(f"eviction threshold {signal} must be positive: {text}")
    return Threshold(signal, Value(quantity=qty, text=text))


def _min_reclaim(signal: str, text: str) -> Value:
    if signal not in SIGNAL_RESOURCE:
        raise ThresholdError(f"unsupported eviction signal {signal}")
    if text.endswith("%"):
        pct = _percentage(text)
        if pct <= 0:
            raise ThresholdError(f"eviction percentage minimum reclaim {signal} must be positive: {text}")
        return Value(percentage=pct)
    qty = parse_quantity(text)
    if qty < 0:
        raise ThresholdError(f"negative eviction minimum reclaim specified for {signal}")
    return Value(quantity=qty, text=text)


def parse_thresholds(hard: Mapping[str, str], soft: Mapping[str, str] | None = None,
                     soft_grace: Mapping[str, str] | None = None, min_reclaim: Mapping[str, str] | None = None,
                     enforce_node_allocatable: Iterable[str] = ()) -> list[Threshold]:
    """ParseThresholdConfig: hard, then soft thresholds (each needs a grace period), minimum reclaims, and an
    allocatableMemory.available copy of the hard memory threshold when `pods` allocatable is enforced."""
    out = [t for s, v in sorted(hard.items()) if (t := parse_threshold(s, v)) is not None]
    graces = {s: parse_duration(v) for s, v in (soft_grace or {}).items()}
    for s, v in sorted((soft or {}).items()):
        t = parse_threshold(s, v)
        if t is None:
            continue
        if s not in graces:
            raise ThresholdError(f"grace period must be specified for the soft eviction threshold {s}")
        out.append(Threshold(s, t.value, grace_period=graces[s]))
    reclaims = {s: _min_reclaim(s, v) for s, v in (min_reclaim or {}).items()}
    out = [Threshold(t.signal, t.value, t.grace_period, reclaims.get(t.signal)) for t in out]
    if "pods" in enforce_node_allocatable:
        out += [Threshold(ALLOCATABLE_MEMORY_AVAILABLE, t.value, 0.0, t.min_reclaim)
                for t in list(out) if t.signal == MEMORY_AVAILABLE and t.hard]
    return out


@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int
    time: float  # when the stats behind it were taken (unix seconds)


def format_amount(signal: str, amount: int) -> str:
    return format_quantity(Fraction(amount), binary=signal in _BYTE_SIGNALS)


def thresholds_met(thresholds: Sequence[Threshold], observations: Mapping[str, Observation],
                   enforce_min_reclaim: bool) -> list[Threshold]:
    """The thresholds whose signal is below the value (plus the minimum reclaim, when asked)."""
    out = []
    for t in thresholds:
        obs = observations.get(t.signal)
        if obs is None:
            continue
        bar = t.value.amount(obs.capacity)
        if enforce_min_reclaim and t.min_reclaim is not None:
            bar += t.min_reclaim.amount(obs.capacity)
        if bar > obs.available:
            out.append(t)
    return out


def merge(a: Sequence[Threshold], b: Sequence[Threshold]) -> list[Threshold]:
    return [*a, *(t for t in b if t not in a)]


def node_conditions(thresholds: Iterable[Threshold]) -> list[str]:
    out: list[str] = []
    for t in thresholds:
        c = SIGNAL_CONDITION.get(t.signal)
        if c is not None and c not in out:
            out.append(c)
    return out


def by_eviction_priority(thresholds: Iterable[Threshold]) -> list[Threshold]:
    """Memory first, then the rest in their order (a stable sort, as upstream's byEvictionPriority means)."""
    return sorted(thresholds, key=lambda t: 0 if SIGNAL_RESOURCE.get(t.signal) == RESOURCE_MEMORY else
                  (1 if t.signal in SIGNAL_RESOURCE else 2))
