"""Pod builders shared by the cgroups tests (this module holds no tests itself)."""

from __future__ import annotations

from typing import Any

from minikubelet.base.podview import PodView


def ctr(
    name: str = "c",
    req: dict[str, str] | None = None,
    lim: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if req is not None:
        resources["requests"] = req
    if lim is not None:
        resources["limits"] = lim
    c: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if restart_policy is not None:
        c["restartPolicy"] = restart_policy
    return c


def sidecar(name: str, req: dict[str, str] | None = None, lim: dict[str, str] | None = None) -> dict[str, Any]:
    return ctr(name, req, lim, restart_policy="Always")


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **kw: Any) -> PodView:
    """The view the cgroups rules take, over `pod_dict`."""
    return PodView.of(pod_dict(containers, init, **kw))


def pod_dict(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    uid: str = "11111111-2222-3333-4444-555555555555",
    overhead: dict[str, str] | None = None,
    pod_resources: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, **spec_extra}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    if pod_resources:
        spec["resources"] = pod_resources
    metadata: dict[str, Any] = {"name": "p", "namespace": "default", "uid": uid}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


CPU_MEM = {"cpu": "100m", "memory": "100Mi"}
