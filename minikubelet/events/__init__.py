"""Kubernetes Events the agent records: a bounded local store, aggregated like the kubelet's recorder.
Once the node joined a cluster, `events.api_sink.ApiEventSink` also writes them as core/v1 Events."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(slots=True)
class _Event:
    """One aggregated event, kept compact (a node keeps up to `capacity` of them) and rendered on read."""

    seq: int
    namespace: str
    name: str
    uid: str
    field_path: str
    etype: str
    reason: str
    message: str
    first: float
    last: float
    count: int = 1

    def render(self, node: str) -> dict[str, Any]:
        obj: dict[str, Any] = {"kind": "Pod", "namespace": self.namespace, "name": self.name, "uid": self.uid,
                               "apiVersion": "v1"}
        if self.field_path:
            obj["fieldPath"] = self.field_path
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{self.name}.{self.seq:x}", "namespace": self.namespace},
            "involvedObject": obj,
            "reason": self.reason,
            "message": self.message,
            "source": {"component": "kubelet", "host": node},
            "firstTimestamp": rfc3339(self.first),
            "lastTimestamp": rfc3339(self.last),
            "count": self.count,
            "type": self.etype,
            "reportingComponent": "kubelet",
            "reportingInstance": node,
        }


class EventRecorder:
    """Keeps the newest `capacity` distinct events; repeats bump count and lastTimestamp."""

    def __init__(self, clock: Clock, node_name: str, capacity: int = 1000) -> None:
        self._clock = clock
        self._node = node_name
        self._capacity = capacity
        self._events: OrderedDict[tuple[str, str, str, str, str], _Event] = OrderedDict()
        self._seq = 0
        self._sinks: list[Callable[[dict[str, Any]], None]] = []

    def add_sink(self, sink: Callable[[dict[str, Any]], None]) -> None:
        """`sink(event)` gets every event as recorded (a v1 Event with count 1), after the local store."""
        self._sinks.append(sink)

    def pod_event(self, pod: Pod, etype: str, reason: str, message: str, container: str = "") -> None:
        uid = podview.uid(pod)
        path = field_path(pod, container) if container else ""
        now = self._clock.now()
        key = (uid, path, etype, reason, message)
        ev = self._events.get(key)
        if ev is not None:
            ev.count += 1
            ev.last = now
            self._events.move_to_end(key)
        else:
            self._seq += 1
            self._events[key] = _Event(self._seq, podview.namespace(pod), podview.name(pod), uid, path, etype,
                                       reason, message, now, now)
            while len(self._events) > self._capacity:
                self._events.popitem(last=False)
        if self._sinks:
            one = _Event(0, podview.namespace(pod), podview.name(pod), uid, path, etype, reason, message, now, now)
            for sink in self._sinks:
                sink(one.render(self._node))
        log.info(
            "event",
            extra={
                "kv": {
                    "type": etype,
                    "reason": reason,
                    "object": f"{podview.namespace(pod)}/{podview.name(pod)}",
                    "fieldPath": path,
                    "message": message,
                }
            },
        )

    def list(self, pod_uid: str | None = None) -> list[dict[str, Any]]:
        return [e.render(self._node) for e in self._events.values() if pod_uid is None or e.uid == pod_uid]
