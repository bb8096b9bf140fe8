"""Durations as Go prints them (time.Duration.String)."""

from __future__ import annotations


def go_duration(seconds: float) -> str:
    """Format like Go's time.Duration.String for whole seconds: 10s, 1m20s, 5m0s, 1h0m0s."""
    total = round(seconds)
    if total < 60:
        return f"{total}s"
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h{m}m{s}s"
    return f"{m}m{s}s"
