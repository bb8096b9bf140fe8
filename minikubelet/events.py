"""Kubernetes Events the agent records: a bounded local store, aggregated like the kubelet's recorder."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod

log = logging.getLogger("minikubelet.events")

# Reasons used by the upstream kubelet (pkg/kubelet/events/event.go).
PULLING = "Pulling"
PULLED = "Pulled"
FAILED = "Failed"
BACKOFF = "BackOff"
CREATED = "Created"
STARTED = "Started"
KILLING = "Killing"
UNHEALTHY = "Unhealthy"
FAILED_POST_START_HOOK = "FailedPostStartHook"
FAILED_PRE_STOP_HOOK = "FailedPreStopHook"
EXCEEDED_GRACE_PERIOD = "ExceededGracePeriod"
DEADLINE_EXCEEDED = "DeadlineExceeded"
FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"
SANDBOX_CHANGED = "SandboxChanged"
FAILED_MOUNT = "FailedMount"
INSPECT_FAILED = "InspectFailed"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"


def field_path(pod: Pod, container_name: str) -> str:
    kind = podview.container_kind(pod, container_name)
    if kind in ("init", "sidecar"):
        return f"spec.initContainers{{{container_name}}}"
    if kind == "regular":
        return f"spec.containers{{{container_name}}}"
    return ""


class EventRecorder:
    """Keeps the newest `capacity` distinct events; repeats bump count and lastTimestamp."""

    def __init__(self, clock: Clock, node_name: str, capacity: int = 1000) -> None:
        self._clock = clock
        self._node = node_name
        self._capacity = capacity
        self._events: OrderedDict[tuple[str, ...], dict[str, Any]] = OrderedDict()
        self._seq = 0

    def pod_event(self, pod: Pod, etype: str, reason: str, message: str, container: str = "") -> None:
        obj: dict[str, Any] = {
            "kind": "Pod",
            "namespace": podview.namespace(pod),
            "name": podview.name(pod),
            "uid": podview.uid(pod),
            "apiVersion": "v1",
        }
        if container:
            obj["fieldPath"] = field_path(pod, container)
        self._record(obj, etype, reason, message)

    def _record(self, obj: dict[str, Any], etype: str, reason: str, message: str) -> None:
        now = rfc3339(self._clock.now())
        key = (obj.get("uid", ""), obj.get("fieldPath", ""), etype, reason, message)
        ev = self._events.get(key)
        if ev is not None:
            ev["count"] += 1
            ev["lastTimestamp"] = now
            self._events.move_to_end(key)
        else:
            self._seq += 1
            ev = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{obj.get('name')}.{self._seq:x}", "namespace": obj.get("namespace", "default")},
                "involvedObject": obj,
                "reason": reason,
                "message": message,
                "source": {"component": "kubelet", "host": self._node},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "type": etype,
                "reportingComponent": "kubelet",
                "reportingInstance": self._node,
            }
            self._events[key] = ev
            while len(self._events) > self._capacity:
                self._events.popitem(last=False)
        log.info(
            "event",
            extra={
                "kv": {
                    "type": etype,
                    "reason": reason,
                    "object": f"{obj.get('namespace')}/{obj.get('name')}",
                    "fieldPath": obj.get("fieldPath", ""),
                    "message": message,
                }
            },
        )

    def list(self, pod_uid: str | None = None) -> list[dict[str, Any]]:
        evs = list(self._events.values())
        if pod_uid is not None:
            evs = [e for e in evs if e["involvedObject"].get("uid") == pod_uid]
        return evs
