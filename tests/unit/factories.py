"""Builders for runtime observations used by the pure-core tests."""

from __future__ import annotations

import itertools
from typing import Any

from cri.types import (
    ANNOTATION_HASH,
    ANNOTATION_RESTART_COUNT,
    LABEL_CONTAINER_NAME,
    LABEL_POD_UID,
    ContainerMeta,
    ContainerState,
    ContainerStatus,
    PodMeta,
    PodSandboxStatus,
    SandboxState,
)
from minikubelet.base import podview

_ids = itertools.count(1)
T0 = 1_700_000_000.0


def pod(
    containers: list[dict[str, Any]] | None = None,
    inits: list[dict[str, Any]] | None = None,
    restart_policy: str = "Always",
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "containers": containers if containers is not None else [c("app")],
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 30,
        **spec,
    }
    if inits:
        s["initContainers"] = inits
    return {"metadata": {"name": "p", "namespace": "default", "uid": "uid-1"}, "spec": s}


def c(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", **kw}


def sidecar(name: str, **kw: Any) -> dict[str, Any]:
    return c(name, restartPolicy="Always", **kw)


def sandbox(ready: bool = True, attempt: int = 0, ip: str = "10.0.0.2") -> PodSandboxStatus:
    return PodSandboxStatus(
        id=f"sb{next(_ids)}",
        metadata=PodMeta("p", "default", "uid-1", attempt),
        state=SandboxState.READY if ready else SandboxState.NOTREADY,
        created_at=T0 + attempt,
        ip=ip if ready else "",
    )


def running(p: dict[str, Any], name: str, restarts: int = 0, started_at: float = T0 + 5) -> ContainerStatus:
    return _status(p, name, ContainerState.RUNNING, restarts, started_at=started_at)


def exited(p: dict[str, Any], name: str, code: int, restarts: int = 0, finished_at: float = T0 + 10,
           reason: str = "") -> ContainerStatus:
    return _status(p, name, ContainerState.EXITED, restarts, exit_code=code, finished_at=finished_at,
                   reason=reason or ("Completed" if code == 0 else "Error"))


def _status(p: dict[str, Any], name: str, state: ContainerState, restarts: int, **kw: Any) -> ContainerStatus:
    spec = podview.find_container(p, name) or {"name": name}
    kw.setdefault("started_at", T0 + 5)
    return ContainerStatus(
        id=f"c{next(_ids)}",
        sandbox_id="sb",
        metadata=ContainerMeta(name, restarts),
        state=state,
        image="busybox:1.36",
        image_ref="docker://sha256:abc",
        created_at=T0 + restarts,
        labels={LABEL_CONTAINER_NAME: name, LABEL_POD_UID: "uid-1"},
        annotations={ANNOTATION_RESTART_COUNT: str(restarts), ANNOTATION_HASH: podview.container_hash(spec)},
        **kw,
    )
