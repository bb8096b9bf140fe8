"""Registering the Node (upstream kubelet_node_status.go registerWithAPIServer / tryRegisterWithAPIServer).

The Node is POSTed with its labels (the well-known ones of `node/labels.py` plus `--node-labels`, which the
configuration already checked against NodeRestriction's rules), the `registerWithTaints` taints, the
controller-managed attach/detach annotation and the full status. A 409 (or 403: creating is forbidden,
the Node may still exist) means an existing Node is adopted: its annotation, default labels, huge page
and default resources are reconciled with ours and patched if they differ. Attempts are retried with
upstream's backoff: 100 ms doubling to 7 s.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.patch import node_status_patch
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError
from minikubelet.metrics import NodeStartupLatency
from minikubelet.node.labels import (
    LABEL_ARCH,
    LABEL_ARCH_BETA,
    LABEL_HOSTNAME,
    LABEL_OS,
    LABEL_OS_BETA,
    node_labels,
)

log = logging.getLogger("minikubelet.node.registration")
Json = dict[str, Any]

CMAD_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"
NODES = "/api/v1/nodes"
_DEFAULT_LABELS = (
    LABEL_HOSTNAME, "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", LABEL_OS, LABEL_ARCH,
    "node.kubernetes.io/windows-build", LABEL_OS_BETA, LABEL_ARCH_BETA,
)
BACKOFF_INITIAL = 0.1
BACKOFF_MAX = 7.0


def initial_node(name: str, extra_labels: Mapping[str, str], taints: tuple[Mapping[str, str], ...]) -> Json:
    """The Node before its status setters run (upstream initialNode)."""
    node: Json = {"kind": "Node", "apiVersion": "v1",
                  "metadata": {"name": name, "labels": dict(sorted(node_labels(name, extra_labels).items())),
                               "annotations": {CMAD_ANNOTATION: "true"}},
                  "spec": {}, "status": {}}
    if taints:
        node["spec"]["taints"] = [{k: v for k, v in t.items() if v or k != "value"} for t in taints]
    return node


def _reconcile_default_resources(initial: Json, existing: Json) -> bool:
    status, changed = existing.setdefault("status", {}), False
    for key in ("capacity", "allocatable"):
        if status.get(key) is None:
            if (initial.get("status") or {}).get(key) is not None:
                status[key] = copy.deepcopy(initial["status"][key])
                changed = True
            else:
                status[key] = {}
    return changed


def _reconcile_hugepages(initial: Json, existing: Json) -> bool:
    changed = _reconcile_default_resources(initial, existing)
    status, new = existing["status"], initial.get("status") or {}
    for key in ("capacity", "allocatable"):
        ours = {k: v for k, v in (new.get(key) or {}).items() if k.startswith("hugepages-")}
        theirs = status[key]
        for k in [k for k in theirs if k.startswith("hugepages-") and k not in ours]:
            del theirs[k]
            changed = True
        for k, v in ours.items():
            if theirs.get(k) != v:
                theirs[k] = v
                changed = True
    return changed


def _reconcile_labels(initial: Json, existing: Json) -> bool:
    labels = existing.setdefault("metadata", {}).setdefault("labels", {})
    wanted = initial["metadata"].get("labels") or {}
    changed = False
    for key in _DEFAULT_LABELS:
        if key not in wanted:
            continue
        if labels.get(key) != wanted[key]:
            labels[key] = wanted[key]
            changed = True
        if labels.get(key) == "":
            del labels[key]
    return changed


def _reconcile_cmad(initial: Json, existing: Json) -> bool:
    want = (initial["metadata"].get("annotations") or {}).get(CMAD_ANNOTATION)
    annotations = existing.setdefault("metadata", {}).setdefault("annotations", {})
    if annotations.get(CMAD_ANNOTATION) == want:
        return False
    if want is None:
        annotations.pop(CMAD_ANNOTATION, None)
    else:
        annotations[CMAD_ANNOTATION] = want
    return True


def reconcile_existing(initial: Json, existing: Json) -> bool:
    """Make `existing` agree with ours where upstream does; True when it must be patched."""
    changed = _reconcile_cmad(initial, existing)
    changed = _reconcile_labels(initial, existing) or changed
    return _reconcile_hugepages(initial, existing) or changed


class NodeRegistration:
    def __init__(self, client: RestClient, clock: Clock, node_name: str, build: Callable[[], Awaitable[Json]],
                 startup: NodeStartupLatency | None = None) -> None:
        self.client = client
        self.startup = startup
        self.clock = clock
        self.node_name = node_name
        self.build = build
        self.path = f"{NODES}/{node_name}"

    async def register(self) -> Json:
        """Until it succeeds: the Node as the API server has it after registration."""
        if self.startup is not None:
            self.startup.attempt_register()
        step = BACKOFF_INITIAL
        while True:
            await self.clock.sleep(step)
            step = min(step * 2, BACKOFF_MAX)
            try:
                node = await self.build()
                log.info("attempting to register node", extra={"kv": {"node": self.node_name}})
                registered = await self.try_register(node)
            except (ApiError, TransportError) as e:
                log.warning("unable to register node with API server",
                            extra={"kv": {"node": self.node_name, "err": str(e)}})
                continue
            if registered is not None:
                log.info("successfully registered node", extra={"kv": {"node": self.node_name}})
                return registered

    async def try_register(self, node: Json) -> Json | None:
        try:
            created = await self.client.create(NODES, node)
            if self.startup is not None:
                self.startup.registered_new_node()
            return created
        except ApiError as e:
            if not (e.already_exists or e.forbidden):
                raise
            if e.forbidden:
                log.warning("creating the node is forbidden, looking for an existing one",
                            extra={"kv": {"node": self.node_name, "err": e.message}})
        existing = await self.client.get(self.path)
        original = copy.deepcopy(existing)
        log.info("node was previously registered", extra={"kv": {"node": self.node_name}})
        if reconcile_existing(node, existing):
            return await self.client.patch(f"{self.path}/status", node_status_patch(original, existing))
        return existing
