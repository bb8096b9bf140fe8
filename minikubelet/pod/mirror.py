"""Mirror pods: the API server's view of this node's static pods (upstream pod/mirror_client.go and the
mirror handling of kubelet.go SyncPod / HandlePodCleanups).

For every static pod (file or URL source) whose worker runs (upstream makes it in the pod's sync: none for a
pod refused at admission or waiting behind an older pod of its name) and that is not being terminated, a pod of
the same name and namespace exists in the API: a copy of the static pod with the annotation `kubernetes.io/config.mirror`
set to its `kubernetes.io/config.hash` (it keeps `config.source`, `config.seen` and the hash), and a
controller owner reference to this Node (NodeRestriction refuses anything else). A mirror pod that was
deleted is created again; one whose hash is not the static pod's (an older version) or that is being
deleted is deleted (grace 0, uid precondition) and then re-created; one whose static pod is gone is
deleted (grace 0, no precondition, as `static-pod-mirror-delete.json`) unless that static pod is still
terminating. Mirror pods are never run: the API source hands them here, not to the pod manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minikubelet.base import podview
from minikubelet.base.clock import Clock, sleep_until_woken
from minikubelet.base.podview import Pod
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError

log = logging.getLogger("minikubelet.pod.mirror")
Json = dict[str, Any]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
HASH_ANNOTATION = "kubernetes.io/config.hash"
SYNC_PERIOD = 10.0


def is_mirror_pod(pod: Pod) -> bool:
    ann = podview.meta(pod).get("annotations")
    return isinstance(ann, dict) and bool(ann.get(MIRROR_ANNOTATION))


def is_static_pod(pod: Pod) -> bool:
    """From the static pod directory or a manifest URL (upstream IsStaticPod: any source but the API)."""
    return podview.is_static(pod)


def pod_hash(pod: Pod) -> str:
    """upstream getPodHash: the config.hash annotation (the static pod's uid is that hash)."""
    ann = podview.meta(pod).get("annotations")
    value = ann.get(HASH_ANNOTATION) if isinstance(ann, dict) else None
    return str(value) if value else podview.uid(pod)


def is_mirror_of(mirror: Pod, static: Pod) -> bool:
    ann = podview.meta(mirror).get("annotations") or {}
    return isinstance(ann, dict) and ann.get(MIRROR_ANNOTATION) == pod_hash(static)


def mirror_pod(static: Pod, node_name: str, node_uid: str) -> Json:
    """The mirror pod's body for a create (upstream CreateMirrorPod)."""
    out = {k: copy.deepcopy(v) for k, v in static.items()}  # the whole pod, status too (the server resets it)
    md = out["metadata"] = copy.deepcopy(podview.meta(static))
    md["annotations"] = {**(md.get("annotations") or {}), MIRROR_ANNOTATION: pod_hash(static)}
    md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid,
                              "controller": True}]
    out["apiVersion"], out["kind"] = "v1", "Pod"
    return out


@dataclass(frozen=True)
class StaticPod:
    pod: Pod
    terminating: bool  # being stopped: no mirror is made for it, and its mirror is not yet deleted
    # its worker runs: upstream makes the mirror in the pod's sync, so none is made for a pod refused at admission
    # or waiting behind an older pod of its name (its mirror is kept, as a terminating one's)
    started: bool = True

    @property
    def syncing(self) -> bool:
        return self.started and not self.terminating


class MirrorPods:
    def __init__(self, client: RestClient, clock: Clock, node_name: str,
                 static_pods: Callable[[], Sequence[StaticPod]], *, sync_period: float = SYNC_PERIOD) -> None:
        self.client = client
        self.clock = clock
        self.node_name = node_name
        self.static_pods = static_pods
        self.sync_period = sync_period
        self.mirrors: dict[str, Pod] = {}  # full name -> mirror pod as the API server has it
        self._node_uid = ""
        self._wake = asyncio.Event()

    def set_mirror_pods(self, pods: Sequence[Pod], listed: bool = False) -> None:
        """Every mirror pod bound to this node (from the API source). The API source hands them over after
        every pod event, the same objects when untouched: the sync is woken when one of them changed, and after
        a (re)list, when the API server is back."""
        mirrors = {podview.full_name(p): p for p in pods}
        changed = listed or mirrors.keys() != self.mirrors.keys() or any(
            self.mirrors[k] is not p for k, p in mirrors.items())
        self.mirrors = mirrors
        if changed:
            self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await self._wait(self.sync_period)
            self._wake.clear()
            await self.sync()

    async def _wait(self, timeout: float) -> None:
        await sleep_until_woken(self.clock, timeout, self._wake)

    async def sync(self) -> None:
        """Make the mirror pods match the static pods; errors are logged and retried next time."""
        statics: dict[str, StaticPod] = {}
        for s in self.static_pods():
            full = podview.full_name(s.pod)
            if full not in statics or s.syncing:  # of several of one name, the one that runs has the mirror
                statics[full] = s
        for full, mirror in list(self.mirrors.items()):
            static = statics.get(full)
            if static is None:
                await self._delete(mirror, None, "orphaned mirror pod")
        for full, static in statics.items():
            if not static.syncing:
                continue
            current = self.mirrors.get(full)
            if current is not None and (podview.meta(current).get("deletionTimestamp")
                                        or not is_mirror_of(current, static.pod)):
                if not await self._delete(current, podview.uid(current), "stale mirror pod"):
                    continue
                current = None
            if current is None:
                await self._create(static.pod)

    async def _node(self) -> str:
        if not self._node_uid:
            node = await self.client.get(f"/api/v1/nodes/{self.node_name}")
            self._node_uid = str((node.get("metadata") or {}).get("uid") or "")
        return self._node_uid

    async def _create(self, static: Pod) -> None:
        ns = podview.namespace(static)
        try:
            body = mirror_pod(static, self.node_name, await self._node())
            created = await self.client.create(f"/api/v1/namespaces/{ns}/pods", body)
        except ApiError as e:
            if e.already_exists:
                return  # the watch brings the one that exists; a stale one is replaced on the next sync
            log.warning("creating a mirror pod failed", extra={"kv": {"pod": podview.format_pod(static), "err": str(e)}})
            return
        except TransportError as e:
            log.warning("creating a mirror pod failed", extra={"kv": {"pod": podview.format_pod(static), "err": str(e)}})
            return
        # Until the watch delivers it, this is the mirror pod (no second create on the next sync).
        self.mirrors[podview.full_name(created)] = created
        log.info("mirror pod created", extra={"kv": {"pod": podview.format_pod(static)}})

    async def _delete(self, mirror: Pod, uid: str | None, why: str) -> bool:
        ns, name = podview.namespace(mirror), podview.name(mirror)
        body: Json = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                      "preconditions": {"uid": uid} if uid else {}}
        try:
            await self.client.delete(f"/api/v1/namespaces/{ns}/pods/{name}", body)
        except ApiError as e:
            if not (e.not_found or e.code == 409):
                log.warning("deleting a mirror pod failed", extra={"kv": {"pod": f"{name}_{ns}", "err": str(e)}})
                return False
        except TransportError as e:
            log.warning("deleting a mirror pod failed", extra={"kv": {"pod": f"{name}_{ns}", "err": str(e)}})
            return False
        self.mirrors.pop(podview.full_name(mirror), None)
        log.info(f"{why} deleted", extra={"kv": {"pod": f"{name}_{ns}"}})
        return True
