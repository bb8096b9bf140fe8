"""Kubernetes Events the agent records: a bounded local store, aggregated like the kubelet's recorder.
Once the node joined a cluster, `events.api_sink.ApiEventSink` also writes them as core/v1 Events."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
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
LIFECYCLE_HTTP_FALLBACK = "LifecycleHTTPFallback"
EXCEEDED_GRACE_PERIOD = "ExceededGracePeriod"
DEADLINE_EXCEEDED = "DeadlineExceeded"
FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"
SANDBOX_CHANGED = "SandboxChanged"
FAILED_MOUNT = "FailedMount"
INSPECT_FAILED = "InspectFailed"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
NETWORK_NOT_READY = "NetworkNotReady"
# The node's own (involvedObject the Node; written to the `default` namespace).
STARTING_KUBELET = "Starting"
CGROUP_V1 = "CgroupV1"
NODE_ALLOCATABLE_ENFORCED = "NodeAllocatableEnforced"
CGROUP_V1_MESSAGE = ("cgroup v1 detected. cgroup v1 support is deprecated and will be removed in a future release. "
                     "Please migrate to cgroup v2. More information at "
                     "https://git.k8s.io/enhancements/keps/sig-node/5573-remove-cgroup-v1")


def field_path(pod: Pod, container_name: str) -> str:
    kind = podview.container_kind(pod, container_name)
    if kind in ("init", "sidecar"):
        return f"spec.initContainers{{{container_name}}}"
    if kind == "regular":
        return f"spec.containers{{{container_name}}}"
    if kind == "ephemeral":
        return f"spec.ephemeralContainers{{{container_name}}}"
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
    node: bool = False  # about the Node itself, not a pod
    annotations: Mapping[str, str] | None = None  # upstream AnnotatedEventf's (the eviction manager's)

    def render(self, node: str) -> dict[str, Any]:
        obj: dict[str, Any]
        if self.node:
            obj = {"kind": "Node", "name": self.name, "apiVersion": "v1"}  # upstream's nodeRef: no uid, no namespace
        else:
            obj = {"kind": "Pod", "namespace": self.namespace, "name": self.name, "uid": self.uid, "apiVersion": "v1"}
        if self.field_path:
            obj["fieldPath"] = self.field_path
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{self.name}.{self.seq:x}", "namespace": self.namespace,
                         **({"annotations": dict(self.annotations)} if self.annotations else {})},
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

    def pod_event(self, pod: Pod, etype: str, reason: str, message: str, container: str = "",
                  annotations: Mapping[str, str] | None = None) -> None:
        path = field_path(pod, container) if container else ""
        self._record(podview.namespace(pod), podview.name(pod), podview.uid(pod), path, etype, reason, message,
                     node=False, annotations=annotations)

    def node_event(self, etype: str, reason: str, message: str) -> None:
        """An event about this node (upstream records these on its nodeRef: start-up, condition changes)."""
        self._record("default", self._node, "", "", etype, reason, message, node=True)

    def node_status_event(self, etype: str, reason: str) -> None:
        """upstream recordNodeStatusEvent: a node condition's transition."""
        self.node_event(etype, reason, f"Node {self._node} status is now: {reason}")

    def _record(self, namespace: str, name: str, uid: str, path: str, etype: str, reason: str, message: str, *,
                node: bool, annotations: Mapping[str, str] | None = None) -> None:
        now = self._clock.now()
        key = (uid, path, etype, reason, message)
        ev = self._events.get(key)
        if ev is not None:
            ev.count += 1
            ev.last = now
            self._events.move_to_end(key)
        else:
            self._seq += 1
            self._events[key] = _Event(self._seq, namespace, name, uid, path, etype, reason, message, now, now,
                                       node=node, annotations=annotations)
            while len(self._events) > self._capacity:
                self._events.popitem(last=False)
        if self._sinks:
            one = _Event(0, namespace, name, uid, path, etype, reason, message, now, now, node=node,
                         annotations=annotations)
            for sink in self._sinks:
                sink(one.render(self._node))
        # a repeat is a count bump (upstream's correlator), not news: only the first is logged at info
        log.log(logging.INFO if ev is None else logging.DEBUG, "event", extra={"kv": {
            "type": etype, "reason": reason, "object": f"node/{name}" if node else f"{namespace}/{name}",
            "fieldPath": path, "message": message}})

    def list(self, pod_uid: str | None = None) -> list[dict[str, Any]]:
        return [e.render(self._node) for e in self._events.values() if pod_uid is None or e.uid == pod_uid]
