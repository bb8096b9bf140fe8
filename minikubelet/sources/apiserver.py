"""Pods bound to this node, from the API server (upstream config/apiserver.go, source `api`).

A list then watch of `pods` with `fieldSelector=spec.nodeName=<node>` (the only pod list the Node
authorizer allows a node), through `kubeapi.watch.ListWatch`: bookmarks, resume from the last
resourceVersion, a relist on 410, reconnects with backoff. After every change the whole set goes to the
source merge as one SET, as upstream's reflector → UndeltaStore does. A pod with a `deletionTimestamp`
stays in the set: the pod manager turns it into a graceful kill; it leaves the set when the API server
removes it (after the agent's final DELETE, or a forced delete).

Bounds: at most `max_pods` pods are handed over (a node runs at most `maxPods`; the limit is a multiple
of it, so a flood from a hostile or broken server cannot grow the agent without bound), and an object
that is not a pod bound to this node with a uid, name and namespace is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod
from minikubelet.kubeapi.rest import RestClient
from minikubelet.kubeapi.watch import LIST, ListWatch, WatchEvent
from minikubelet.metrics import PodStartupLatency

log = logging.getLogger("minikubelet.sources.apiserver")

API_SOURCE = "api"
PODS_PATH = "/api/v1/pods"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_SEEN_ANNOTATION = "kubernetes.io/config.seen"
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DEFAULT_MAX_PODS = 10 * 110


class ApiserverPodSource:
    def __init__(self, client: RestClient, node_name: str, clock: Clock,
                 update: Callable[[str, list[Pod]], None], *, max_pods: int = DEFAULT_MAX_PODS,
                 mirrors: Callable[[list[Pod], bool], None] = lambda _pods, _listed: None,
                 startup: PodStartupLatency | None = None,
                 min_watch_timeout: float | None = None) -> None:
        """`update(source, pods)` gets the pods to run; `mirrors(pods, listed)` the mirror pods of our static
        pods, which are never run (upstream: the pod manager keeps them apart), and whether they were listed."""
        self.node_name = node_name
        self.clock = clock
        self._update = update
        self._mirrors = mirrors
        self._startup = startup  # the pod start SLIs' watch observations
        self.max_pods = max_pods
        kwargs: dict[str, Any] = {} if min_watch_timeout is None else {"min_timeout": min_watch_timeout}
        self.watch = ListWatch(client, PODS_PATH, clock, field_selector=f"spec.nodeName={node_name}", **kwargs)
        self._pods: dict[str, Pod] = {}  # uid -> pod as the API server sent it
        self._seen: dict[str, str] = {}  # uid -> config.seen, kept across updates of the pod
        # uid -> (the API object, our annotated copy of it): each event changes one pod, so the others' copies
        # are reused (the same objects, which the merge then compares at no cost) instead of rebuilt
        self._copies: dict[str, tuple[Pod, Pod]] = {}
        self._over_limit_logged = False
        self.seen = False  # the first list arrived (upstream sourcesReady)

    async def run(self) -> None:
        async for event in self.watch.events():
            self.apply(event)

    def apply(self, event: WatchEvent) -> None:
        """One list or watch event; the whole set goes to the merge."""
        if event.type == LIST:
            self._pods = {}
            for obj in event.items:
                self._put(obj)
        elif event.type == "DELETED":
            uid = podview.uid(event.object) if self._valid(event.object) else ""
            self._pods.pop(uid, None)
            if self._startup is not None:
                self._startup.forget(uid)
        else:
            self._put(event.object)
        if event.type == LIST or event.type == "DELETED":  # an update replaces its pod's copy in _annotated
            self._seen = {uid: t for uid, t in self._seen.items() if uid in self._pods}
            self._copies = {uid: c for uid, c in self._copies.items() if self._pods.get(uid) is c[0]}
        self.seen = True
        mirrors: list[Pod] = []
        pods: list[Pod] = []
        for p in self._pods.values():
            (mirrors if _is_mirror(p) else pods).append(p)
        self._update(API_SOURCE, [self._annotated(p) for p in pods])
        self._mirrors(mirrors, event.type == LIST)

    def pod(self, uid: str) -> Pod | None:
        """The pod as the API server last sent it (status included), or None."""
        return self._pods.get(uid)

    def _valid(self, obj: Pod) -> bool:
        md = obj.get("metadata")
        spec = obj.get("spec")
        return (isinstance(md, dict) and isinstance(spec, dict) and spec.get("nodeName") == self.node_name
                and all(isinstance(md.get(k), str) and md.get(k) for k in ("uid", "name", "namespace")))

    def _put(self, obj: Pod) -> None:
        if not self._valid(obj):
            log.warning("ignoring an object that is not a pod bound to this node",
                        extra={"kv": {"node": self.node_name}})
            return
        uid = podview.uid(obj)
        if uid not in self._pods and len(self._pods) >= self.max_pods:
            if not self._over_limit_logged:
                log.error("more pods bound to this node than the agent keeps; ignoring the rest",
                          extra={"kv": {"limit": self.max_pods}})
                self._over_limit_logged = True
            return
        self._pods[uid] = obj
        if self._startup is not None and not _is_mirror(obj):
            self._startup.observed_on_watch(obj)

    def _annotated(self, pod: Pod) -> Pod:
        """The pod with the annotations every source's pods carry (upstream podStorage.merge): where it came
        from and when the agent first saw it. Only our copy changes, never the API object."""
        uid = podview.uid(pod)
        cached = self._copies.get(uid)
        if cached is not None and cached[0] is pod:
            return cached[1]
        seen = self._seen.setdefault(uid, rfc3339(self.clock.now()))
        # The status stays: conditions other components set (readiness gates, DisruptionTarget) and a terminal
        # phase are read from it (upstream HandlePodReconcile). managedFields are of no use here and can be
        # large: left out.
        md = {k: v for k, v in pod["metadata"].items() if k != "managedFields"}
        annotations = dict(md.get("annotations") or {})
        annotations[CONFIG_SOURCE_ANNOTATION] = API_SOURCE
        annotations.setdefault(CONFIG_SEEN_ANNOTATION, seen)
        md["annotations"] = annotations
        # List items come without kind and apiVersion, watch events with them: the same pod either way.
        copy = {**pod, "apiVersion": "v1", "kind": "Pod", "metadata": md}
        self._copies[uid] = (pod, copy)
        return copy


def _is_mirror(pod: Pod) -> bool:
    annotations = podview.meta(pod).get("annotations")
    return isinstance(annotations, dict) and bool(annotations.get(CONFIG_MIRROR_ANNOTATION))
