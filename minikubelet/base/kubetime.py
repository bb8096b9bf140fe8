"""Kubernetes timestamps (metav1.Time, RFC 3339)."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(ts: float) -> str:
    """Kubernetes metav1.Time: second precision, UTC, 'Z'."""
    return datetime.fromtimestamp(int(ts), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
