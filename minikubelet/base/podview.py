"""Small read-only views over a pod dict (the API's JSON stays the source of truth)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

Pod = dict[str, Any]
Container = dict[str, Any]
ContainerKind = Literal["init", "sidecar", "regular"]


def meta(pod: Pod) -> dict[str, Any]:
    m = pod.get("metadata")
    return m if isinstance(m, dict) else {}


def spec(pod: Pod) -> dict[str, Any]:
    s = pod.get("spec")
    return s if isinstance(s, dict) else {}


def uid(pod: Pod) -> str:
    return str(meta(pod).get("uid", ""))


def name(pod: Pod) -> str:
    return str(meta(pod).get("name", ""))


def namespace(pod: Pod) -> str:
    return str(meta(pod).get("namespace", "default"))


def full_name(pod: Pod) -> str:
    """The kubelet's pod full name: name_namespace (unique among a node's pods at one time)."""
    return f"{name(pod)}_{namespace(pod)}"


def format_pod(pod: Pod) -> str:
    """As upstream format.Pod: name_namespace(uid), used in messages."""
    return f"{name(pod)}_{namespace(pod)}({uid(pod)})"


def _containers(pod: Pod, key: str) -> list[Container]:
    cs = spec(pod).get(key)
    return [c for c in cs if isinstance(c, dict)] if isinstance(cs, list) else []


def init_containers(pod: Pod) -> list[Container]:
    return _containers(pod, "initContainers")


def app_containers(pod: Pod) -> list[Container]:
    return _containers(pod, "containers")


def is_sidecar(c: Container) -> bool:
    """Only meaningful for init containers: a restartable init container."""
    return c.get("restartPolicy") == "Always"


def sidecars(pod: Pod) -> list[Container]:
    return [c for c in init_containers(pod) if is_sidecar(c)]


def regular_inits(pod: Pod) -> list[Container]:
    return [c for c in init_containers(pod) if not is_sidecar(c)]


def restart_policy(pod: Pod) -> str:
    return str(spec(pod).get("restartPolicy") or "Always")


def should_restart_on_failure(pod: Pod) -> bool:
    return restart_policy(pod) != "Never"


def container_kind(pod: Pod, container_name: str) -> ContainerKind | None:
    for c in init_containers(pod):
        if c.get("name") == container_name:
            return "sidecar" if is_sidecar(c) else "init"
    for c in app_containers(pod):
        if c.get("name") == container_name:
            return "regular"
    return None


def find_container(pod: Pod, container_name: str) -> Container | None:
    for c in init_containers(pod) + app_containers(pod):
        if c.get("name") == container_name:
            return c
    return None


def container_hash(c: Container) -> str:
    """A stable hash of the container spec; a change means the container must be recreated."""
    body = json.dumps(c, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def grace_period(pod: Pod) -> int:
    """Grace for a pod-level stop: the deletion's grace if one was given, else the spec's."""
    m = meta(pod)
    g = m.get("deletionGracePeriodSeconds")
    if not isinstance(g, int) or isinstance(g, bool):
        g = spec(pod).get("terminationGracePeriodSeconds", 30)
    if not isinstance(g, int) or isinstance(g, bool) or g < 0:
        return 30
    return g


def is_static(pod: Pod) -> bool:
    ann = meta(pod).get("annotations")
    return isinstance(ann, dict) and ann.get("kubernetes.io/config.source") in ("file", "http")


def host_network(pod: Pod) -> bool:
    return spec(pod).get("hostNetwork") is True


def probe(c: Container, kind: str) -> dict[str, Any] | None:
    p = c.get(f"{kind}Probe")
    return p if isinstance(p, dict) else None
