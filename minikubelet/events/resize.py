"""The in-place resize Events (upstream pkg/kubelet/events resize.go): their reasons, and messages that carry the
containers' resources and the generation as JSON."""

from __future__ import annotations

import json
from typing import Any

from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.base.quantity import format_quantity, is_binary, parse_quantity

RESIZE_DEFERRED = "ResizeDeferred"
RESIZE_INFEASIBLE = "ResizeInfeasible"
RESIZE_COMPLETED = "ResizeCompleted"
RESIZE_STARTED = "ResizeStarted"
RESIZE_ERROR = "ResizeError"


def _canonical(values: Any) -> dict[str, str]:
    """A resource list as Go prints it: keys sorted, each quantity in its canonical form."""
    out: dict[str, str] = {}
    for name in sorted(values or {}):
        raw = values[name]
        try:
            out[name] = format_quantity(parse_quantity(raw), is_binary(raw))
        except ValueError:
            out[name] = str(raw)
    return out


def _allocation(c: dict[str, Any]) -> dict[str, Any]:
    raw = c.get("resources")
    res: dict[str, Any] = raw if isinstance(raw, dict) else {}
    resources: dict[str, Any] = {}
    for key in ("limits", "requests"):
        if res.get(key):
            resources[key] = _canonical(res[key])
    return {"name": c.get("name"), "resources": resources}


def _summary(pod: Pod, generation: int, error: str) -> str:
    body: dict[str, Any] = {}
    inits = [_allocation(c) for c in podview.init_containers(pod)]
    apps = [_allocation(c) for c in podview.app_containers(pod)]
    if inits:
        body["initContainers"] = inits
    if apps:
        body["containers"] = apps
    body["generation"] = generation
    if error:
        body["error"] = error
    return json.dumps(body, separators=(",", ":"))


def _message(pod: Pod, generation: int, error: str, prefix: str) -> str:
    return f"{prefix}: {_summary(pod, generation, error)}"


def resize_completed(allocated: Pod, generation: int) -> str:
    return _message(allocated, generation, "", "Pod resize completed")


def resize_started(allocated: Pod, generation: int) -> str:
    return _message(allocated, generation, "", "Pod resize started")


def resize_error(allocated: Pod, generation: int, error: str) -> str:
    return _message(allocated, generation, error, "Pod resize error")


def resize_pending(pod: Pod, reason: str, message: str, generation: int) -> str:
    """`reason` is the admission's (OutOfcpu, ...), not the condition's."""
    return _message(pod, generation, message, f"Pod resize {reason}")
