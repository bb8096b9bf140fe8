"""The latest probe result per (pod uid, container name, probe kind)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from probes.result import ProbeKind, Result

ResultKey = tuple[str, str, ProbeKind]


@dataclass(frozen=True)
class CachedResult:
    container_id: str
    result: Result
    since: float  # wall-clock seconds when this result was first set for this container
    output: str = ""


class ResultsCache:
    """Results the probe workers publish and the pod worker reads.

    `on_change(pod_uid, container_name, kind)` runs when a key gets a result it did not hold
    before (a new container ID or a different result), as upstream's results manager sends
    an update."""

    def __init__(self, on_change: Callable[[str, str, ProbeKind], None] | None = None) -> None:
        self._entries: dict[ResultKey, CachedResult] = {}
        self._on_change = on_change

    def get(self, pod_uid: str, container_name: str, kind: ProbeKind) -> CachedResult | None:
        return self._entries.get((pod_uid, container_name, kind))

    def get_for(self, pod_uid: str, container_name: str, kind: ProbeKind, container_id: str) -> Result | None:
        """The result if it belongs to this container ID (results of older containers do not count)."""
        entry = self.get(pod_uid, container_name, kind)
        if entry is None or entry.container_id != container_id:
            return None
        return entry.result

    def set(
        self,
        pod_uid: str,
        container_name: str,
        kind: ProbeKind,
        container_id: str,
        result: Result,
        now: float,
        output: str = "",
    ) -> bool:
        key = (pod_uid, container_name, kind)
        previous = self._entries.get(key)
        if previous is not None and previous.container_id == container_id and previous.result == result:
            return False
        self._entries[key] = CachedResult(container_id, result, now, output)
        if self._on_change is not None:
            self._on_change(pod_uid, container_name, kind)
        return True

    def remove(self, pod_uid: str, container_name: str, kind: ProbeKind) -> None:
        self._entries.pop((pod_uid, container_name, kind), None)

    def remove_pod(self, pod_uid: str) -> None:
        for key in [k for k in self._entries if k[0] == pod_uid]:
            del self._entries[key]

    def keys(self) -> list[ResultKey]:
        return list(self._entries)
