"""The graceful shutdown's start and end times, kept in <rootDir>/graceful_node_shutdown_state as the kubelet keeps
them, so that kubelet_graceful_shutdown_{start,end}_time_seconds still say after the boot when the last shutdown
ran."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime

from minikubelet.metrics import Metrics

log = logging.getLogger("minikubelet.nodeshutdown")

STATE_FILE = "graceful_node_shutdown_state"
_ZERO = "0001-01-01T00:00:00Z"  # Go's zero time.Time, as encoding/json writes it


def _go_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z") if ts else _ZERO


def _seconds(value: object) -> float:
    """Unix seconds (whole, as the kubelet's gauge), 0 for the zero time or anything unreadable."""
    if not isinstance(value, str) or value.startswith("0001-01-01"):
        return 0.0
    try:
        return float(int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()))
    except ValueError:
        return 0.0


class ShutdownState:
    def __init__(self, root_dir: str, metrics: Metrics) -> None:
        self.path = os.path.join(root_dir, STATE_FILE)
        self._metrics = metrics

    def restore(self) -> None:
        """At start: the gauges from the last shutdown's record, if any."""
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            log.error("Failed to load graceful shutdown state", extra={"kv": {"err": str(e)}})
            return
        if not isinstance(data, dict):
            return
        if start := _seconds(data.get("startTime")):
            self._metrics.graceful_shutdown_start.set(start)
        if end := _seconds(data.get("endTime")):
            self._metrics.graceful_shutdown_end.set(end)

    def started(self, now: float) -> None:
        self._store(now, 0.0)
        self._metrics.graceful_shutdown_start.set(int(now))
        self._metrics.graceful_shutdown_end.set(0)

    def ended(self, start: float, now: float) -> None:
        self._store(start, now)
        self._metrics.graceful_shutdown_end.set(int(now))

    def _store(self, start: float, end: float) -> None:
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"startTime": _go_time(start), "endTime": _go_time(end)}, f, separators=(",", ":"))
            os.replace(tmp, self.path)
        except OSError as e:
            log.error("Failed to store graceful shutdown state", extra={"kv": {"err": str(e)}})
