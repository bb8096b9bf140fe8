"""Fields Go prints even when unset (struct values, metav1.Time without omitempty): a client reading
a status written by someone else sees them, so the stored objects carry them too (pod-status-patch.json)."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
_CONTAINER_STATUS = (("state", dict), ("lastState", dict), ("ready", False), ("restartCount", 0), ("image", ""),
                     ("imageID", ""))


def _fill(obj: Json, defaults: tuple[tuple[str, object], ...]) -> None:
    for key, default in defaults:
        if key not in obj:
            obj[key] = default() if isinstance(default, type) else default


def pod_status(status: Json) -> None:
    for condition in status.get("conditions") or []:
        _fill(condition, (("lastProbeTime", None), ("lastTransitionTime", None)))
    for kind in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(kind) or []:
            if isinstance(cs, dict):
                _fill(cs, _CONTAINER_STATUS)


def node_status(status: Json) -> None:
    for condition in status.get("conditions") or []:
        _fill(condition, (("lastHeartbeatTime", None), ("lastTransitionTime", None)))
