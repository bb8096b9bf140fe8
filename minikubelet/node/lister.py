"""The node's own Node object as the API server has it, for admission (upstream: the kubelet's node
informer, `nodeLister`, and `GetCachedNode` in kubelet_nodecache.go).

A list, then a watch, of `nodes` with `fieldSelector=metadata.name=<node>` (the recorded kubelet's node
watch; the Node authorizer lets a node read only its own Node). Admission then sees the labels and
taints as they are in the API (`kubectl label` / `kubectl taint` included) and the allocatable the node
reports, not the ones the agent was started with. Like upstream's cached node, the last Node seen stays
in use while the object is missing (deleted); before any was seen the
caller falls back to the locally built node (upstream getNodeAnyWay → initialNode).

`node_from_api` is pure: a field of the wrong shape is skipped with the rest kept, so a hostile or broken
object never stops admission.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.base.quantity import QuantityError, parse_quantity
from minikubelet.kubeapi.rest import RestClient
from minikubelet.kubeapi.watch import LIST, ListWatch, WatchEvent
from minikubelet.node.labels import Node, Taint

log = logging.getLogger("minikubelet.node.lister")
Json = dict[str, Any]

NODES_PATH = "/api/v1/nodes"


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _taints(value: object) -> tuple[Taint, ...]:
    if not isinstance(value, list):
        return ()
    out = []
    for t in value:
        if isinstance(t, Mapping) and isinstance(t.get("key"), str):
            value_ = t.get("value")
            effect = t.get("effect")
            out.append(Taint(t["key"], value_ if isinstance(value_, str) else "",
                             effect if isinstance(effect, str) else ""))
    return tuple(out)


def _resources(value: object) -> dict[str, Fraction]:
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, Fraction] = {}
    for name, quantity in value.items():
        if not isinstance(name, str):
            continue
        try:
            out[name] = parse_quantity(quantity)
        except QuantityError:
            continue
    return out


def node_from_api(obj: Mapping[str, Any]) -> Node | None:
    """The Node object as admission uses it: name, labels, `spec.taints`, `status.allocatable`.
    None when it has no name."""
    md = obj.get("metadata")
    if not isinstance(md, Mapping) or not isinstance(md.get("name"), str) or not md["name"]:
        return None
    spec = obj.get("spec")
    status = obj.get("status")
    return Node(
        name=md["name"],
        labels=_str_map(md.get("labels")),
        taints=_taints(spec.get("taints") if isinstance(spec, Mapping) else None),
        allocatable=_resources(status.get("allocatable") if isinstance(status, Mapping) else None),
    )


def _older(rv: str, than: str) -> bool:
    """resourceVersions compared as upstream's isNewer does (as integers); anything else is not older."""
    try:
        return int(rv) < int(than)
    except ValueError:
        return False


class NodeLister:
    def __init__(self, client: RestClient, node_name: str, clock: Clock, *,
                 min_watch_timeout: float | None = None) -> None:
        self.node_name = node_name
        kwargs: dict[str, Any] = {} if min_watch_timeout is None else {"min_timeout": min_watch_timeout}
        self._client = client
        self.watch = ListWatch(client, NODES_PATH, clock, field_selector=f"metadata.name={node_name}", **kwargs)
        self.synced = asyncio.Event()  # the first list arrived (upstream nodeHasSynced)
        self._node: Node | None = None
        self._object: Json | None = None  # the Node object itself, None while it is deleted
        self.resource_version = ""  # of the Node in use
        self.on_object: Callable[[Json], None] | None = None  # each newer Node object seen (the pod network's podCIDRs)

    def get(self) -> Node | None:
        """The last Node seen, or None before any."""
        return self._node

    def object(self) -> Json | None:
        """The Node object as the watch last brought it (upstream nodeLister.Get, which the node status update
        reads on its first try); None before the first list and while the Node is deleted. Never mutate."""
        return self._object

    def current_object(self) -> Json | None:
        """`object()` while the watch is established, else None: the node status update then reads the Node from
        the API server. Upstream reads its lister on the first try assuming the watch's delays are small; after
        an API outage ours may wait out a backoff of up to a minute, while the node lifecycle controller has set
        the conditions to Unknown meanwhile: the status must be compared with that, not with our own last one."""
        return self._object if self.watch.established else None

    async def refresh(self) -> None:
        """Read the Node now (upstream getNodeSync), for a pod its labels did not match: the watch may not
        have brought a label added a moment ago. Raises the client's errors."""
        self._put(await self._client.get(f"{NODES_PATH}/{self.node_name}"))

    async def run(self) -> None:
        async for event in self.watch.events():
            self.apply(event)

    def apply(self, event: WatchEvent) -> None:
        if event.type == LIST:
            for obj in event.items:
                self._put(obj)
        elif event.type != "DELETED":
            self._put(event.object)
        else:
            self._object = None
        # DELETED: keep the last one (upstream's cached node) until the Node is back
        self.synced.set()

    def _put(self, obj: Json) -> None:
        node = node_from_api(obj)
        if node is None or node.name != self.node_name:
            log.warning("ignoring a node object that is not this node", extra={"kv": {"node": self.node_name}})
            return
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        rv = rv if isinstance(rv, str) else ""
        if _older(rv, self.resource_version):
            return  # a read that crossed a newer watch event (upstream isNewer)
        self.resource_version = rv
        self._object = obj
        if self.on_object is not None:
            self.on_object(obj)
        if self._node is None or self._node.labels != node.labels or self._node.taints != node.taints:
            log.info("node labels and taints for admission", extra={"kv": {
                "node": node.name, "labels": len(node.labels), "taints": [str(t) for t in node.taints]}})
        self._node = node
