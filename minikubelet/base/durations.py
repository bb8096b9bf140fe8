"""Durations as Go prints them (time.Duration.String)."""

from __future__ import annotations


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String of `seconds`, at nanosecond precision: 10s, 1m20s, 717ms, 1m0.809s, 0s."""
    ns = round(seconds * 1_000_000_000)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        # below a second Go picks the largest unit that keeps the integer part non-zero
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns, size) + unit
    h, rem = divmod(ns, 3_600_000_000_000)
    m, rem = divmod(rem, 60_000_000_000)
    s = _trim(rem, 1_000_000_000) + "s"
    if h:
        return f"{sign}{h}h{m}m{s}"
    if m:
        return f"{sign}{m}m{s}"
    return sign + s


def go_duration_ms(seconds: float) -> str:
    """Go's `d.Truncate(time.Millisecond).String()`, as the kubelet prints pull times."""
    return go_duration(int(seconds * 1000) / 1000)


def _trim(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
