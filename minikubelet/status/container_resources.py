"""A container status's `resources` (upstream kubelet_pods.go convertContainerStatusResources): what the runtime
says a running container runs with, never what the spec asks.

The allocated requirements are the base (a container that does not run reports them as they are); for a running
one the CPU limit comes from the runtime's quota/period, the CPU request from its shares, the memory limit from its
limit, the memory request (no runtime reports one) from the actuated record; a value the runtime does not give
keeps the one the last status reported for the same running container. Both CPU values below the kernel's
effective minimum (2 shares, a 10m quota) keep the allocated value when that is at or below it too. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from cgroups.cpu import MIN_SHARES, SHARES_PER_CPU
from cri.types import LinuxResources
from minikubelet.base.quantity import format_quantity, parse_quantity

MIN_MILLI_CPU_LIMIT = 10  # upstream cm.MinMilliCPULimit: the smallest quota (1 ms per 100 ms period)


def shares_to_milli_cpu(shares: int) -> int:
    """cm.SharesToMilliCPU."""
    if shares < MIN_SHARES:
        return 0
    return math.ceil(shares * 1000 / SHARES_PER_CPU)


def quota_to_milli_cpu(quota: int, period: int) -> int:
    """cm.QuotaToMilliCPU."""
    if quota <= 0 or period <= 0:
        return 0
    return quota * 1000 // period


def _milli(raw: Any) -> int:
    try:
        return math.ceil(parse_quantity(raw) * 1000)
    except ValueError:
        return 0


def _cpu(milli: int) -> str:
    return format_quantity(Fraction(milli, 1000))


def _bytes(raw: Any) -> int:
    try:
        return math.ceil(parse_quantity(raw))
    except ValueError:
        return 0


def _actual(runtime: LinuxResources | None, actuated: Mapping[str, Mapping[str, str]] | None) -> dict[str, str]:
    """toKubeContainerResources: the runtime's values as quantities (none for what it does not set); everything from
    the actuated record, as recorded, when the runtime reports nothing."""
    out: dict[str, str] = {}
    if runtime is None:
        recorded_requests = (actuated or {}).get("requests") or {}
        recorded_limits = (actuated or {}).get("limits") or {}
        for key, raw in (("cpu_limit", recorded_limits.get("cpu")), ("cpu_request", recorded_requests.get("cpu")),
                         ("memory_limit", recorded_limits.get("memory"))):
            if raw is not None and _bytes(raw) != 0:
                out[key] = raw
        return out
    if (cpu_limit := quota_to_milli_cpu(runtime.cpu_quota, runtime.cpu_period)) > 0:
        out["cpu_limit"] = _cpu(cpu_limit)
    if (cpu_request := shares_to_milli_cpu(runtime.cpu_shares)) > 0:
        out["cpu_request"] = _cpu(cpu_request)
    if runtime.memory_limit_bytes > 0:
        out["memory_limit"] = format_quantity(Fraction(runtime.memory_limit_bytes), True)
    return out


def status_resources(requests: Mapping[str, Any] | None, limits: Mapping[str, Any] | None, running: bool,
                     runtime: LinuxResources | None, actuated: Mapping[str, Mapping[str, str]] | None,
                     old: Mapping[str, Any] | None) -> dict[str, Any]:
    """`requests`/`limits`: the allocated ones (None when the spec has none); `old`: the `resources` of the last
    status when it showed this same container running (None otherwise)."""
    out: dict[str, Any] = {}
    lim = dict(limits) if limits is not None else None
    req = dict(requests) if requests is not None else None
    if running:
        old_limits = (old or {}).get("limits") or {}
        old_requests = (old or {}).get("requests") or {}
        actual = _actual(runtime, actuated)
        if lim is not None:
            cpu_limit = actual.get("cpu_limit")
            if cpu_limit is not None:
                if _milli(cpu_limit) > MIN_MILLI_CPU_LIMIT or _milli(lim.get("cpu", 0)) > MIN_MILLI_CPU_LIMIT:
                    lim["cpu"] = cpu_limit
            elif "cpu" in old_limits:
                lim["cpu"] = old_limits["cpu"]
            if "memory_limit" in actual:
                lim["memory"] = actual["memory_limit"]
            elif "memory" in old_limits:
                lim["memory"] = old_limits["memory"]
        if req is not None:
            cpu_request = actual.get("cpu_request")
            if cpu_request is not None:
                if _milli(cpu_request) > MIN_SHARES or _milli(req.get("cpu", 0)) > MIN_SHARES:
                    req["cpu"] = cpu_request
            elif "cpu" in old_requests:
                req["cpu"] = old_requests["cpu"]
            recorded = ((actuated or {}).get("requests") or {}).get("memory")
            if recorded is not None and _bytes(recorded) > 0:
                req["memory"] = recorded  # as recorded: the spec's own text, or what a resize set
            elif "memory" in old_requests:
                req["memory"] = old_requests["memory"]
    if lim is not None:
        out["limits"] = lim
    if req is not None:
        out["requests"] = req
    return out
