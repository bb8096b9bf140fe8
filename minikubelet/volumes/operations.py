"""What the volume manager did, for the storage families: each set-up (operation volume_mount) and tear-down
(volume_unmount) timed per volume with upstream's plugin names, the volumes the node's pods want (the desired state
of the world) and those set up on the host (the actual state)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from minikubelet.metrics_node import NodeMetrics

PLUGIN_NAMES = {"emptyDir": "kubernetes.io/empty-dir", "hostPath": "kubernetes.io/host-path",
                "configMap": "kubernetes.io/configmap", "secret": "kubernetes.io/secret",
                "downwardAPI": "kubernetes.io/downward-api", "projected": "kubernetes.io/projected"}
# set up once; the others are written again on every pod sync, as upstream remounts them (RequiresRemount)
_MOUNTED_ONCE = ("emptyDir", "hostPath")
MOUNT, UNMOUNT, OVERALL_MOUNT = "volume_mount", "volume_unmount", "overall_volume_mount"


class VolumeOperations:
    def __init__(self, metrics: NodeMetrics | None = None, now: Callable[[], float] = time.monotonic) -> None:
        self._metrics = metrics
        self._now = now
        self.desired: dict[str, dict[str, str]] = {}  # pod uid -> volume name -> plugin
        self.actual: dict[str, dict[str, str]] = {}
        self._wanted_since: dict[tuple[str, str], float] = {}

    def want(self, uid: str, volumes: Mapping[str, str]) -> None:
        """The pod's volumes (name -> kind) are wanted on the host."""
        self.desired[uid] = {name: PLUGIN_NAMES[kind] for name, kind in volumes.items() if kind in PLUGIN_NAMES}
        now = self._now()
        for name in self.desired[uid]:
            self._wanted_since.setdefault((uid, name), now)

    def unwanted(self, uid: str) -> None:
        """The pod has terminated: its volumes leave the desired state (they stay set up until torn down)."""
        self.desired.pop(uid, None)

    def set_up(self, uid: str, name: str, kind: str, ok: bool, seconds: float) -> None:
        plugin = PLUGIN_NAMES.get(kind)
        if plugin is None:
            return
        mounted = self.actual.get(uid, {})
        if kind in _MOUNTED_ONCE and name in mounted and ok:
            return  # already set up: this pass did nothing upstream would count
        if self._metrics is not None:
            self._metrics.storage_operation(plugin, MOUNT, ok, seconds)
        if not ok or name in mounted:
            return
        self.actual.setdefault(uid, {})[name] = plugin
        since = self._wanted_since.pop((uid, name), None)
        if since is not None and self._metrics is not None:
            self._metrics.volume_operation_total.labels(plugin, OVERALL_MOUNT).observe(self._now() - since)

    def torn_down(self, uid: str, ok: bool, seconds: float) -> None:
        """The pod's directory was removed (ok) or not: one volume_unmount per volume it had set up."""
        for plugin in self.actual.get(uid, {}).values():
            if self._metrics is not None:
                self._metrics.storage_operation(plugin, UNMOUNT, ok, seconds)
        if ok:
            self.actual.pop(uid, None)
            self.desired.pop(uid, None)
            for key in [k for k in self._wanted_since if k[0] == uid]:
                del self._wanted_since[key]

    def desired_plugins(self) -> Iterator[str]:
        for volumes in list(self.desired.values()):
            yield from volumes.values()

    def actual_plugins(self) -> Iterator[str]:
        for volumes in list(self.actual.values()):
            yield from volumes.values()


class Timed:
    """`with Timed(ops, uid, name, kind):` reports the set-up's outcome and duration to `ops` (if any)."""

    def __init__(self, ops: VolumeOperations | None, uid: str, name: str, kind: str) -> None:
        self._ops, self._uid, self._name, self._kind = ops, uid, name, kind
        self._t0 = 0.0

    def __enter__(self) -> Timed:
        self._t0 = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: Any) -> None:
        if self._ops is not None:
            self._ops.set_up(self._uid, self._name, self._kind, exc_type is None, time.monotonic() - self._t0)
