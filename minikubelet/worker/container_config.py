"""Translate a pod and one of its containers into the runtime's sandbox and container configs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from cri.types import (
    ANNOTATION_CONTAINER_KIND,
    ANNOTATION_GRACE_PERIOD,
    ANNOTATION_HASH,
    ANNOTATION_RESTART_COUNT,
    ANNOTATION_TERMINATION_MESSAGE_PATH,
    ANNOTATION_TERMINATION_MESSAGE_POLICY,
    LABEL_CONTAINER_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    ContainerConfig,
    ContainerMeta,
    LinuxResources,
    Mount,
    PodMeta,
    PodSandboxConfig,
    PortMapping,
)
from minikubelet.api.expansion import container_env, expand_command
from minikubelet.base import podview
from minikubelet.base.podview import Container, Pod


def pod_labels(pod: Pod) -> dict[str, str]:
    return {
        LABEL_POD_NAME: podview.name(pod),
        LABEL_POD_NAMESPACE: podview.namespace(pod),
        LABEL_POD_UID: podview.uid(pod),
    }


def pod_log_dir(pod_logs_dir: str, pod: Pod) -> str:
    return os.path.join(pod_logs_dir, f"{podview.namespace(pod)}_{podview.name(pod)}_{podview.uid(pod)}")


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def sandbox_config(
    pod: Pod, attempt: int, pod_logs_dir: str, cgroup_parent: str = "", resources: LinuxResources | None = None
) -> PodSandboxConfig:
    sp = podview.spec(pod)
    hostname = str(sp.get("hostname") or podview.name(pod))[:63].rstrip("-.")
    ports = []
    for c in podview.init_containers(pod) + podview.app_containers(pod):
        for p in c.get("ports") or []:
            if isinstance(p, dict) and isinstance(p.get("hostPort"), int) and p["hostPort"] > 0:
                ports.append(
                    PortMapping(
                        container_port=int(p.get("containerPort", 0)),
                        protocol=str(p.get("protocol") or "TCP"),
                        host_port=int(p["hostPort"]),
                        host_ip=str(p.get("hostIP") or ""),
                    )
                )
    annotations = _str_map(podview.meta(pod).get("annotations"))
    annotations[ANNOTATION_GRACE_PERIOD] = str(podview.grace_period(pod))
    return PodSandboxConfig(
        metadata=PodMeta(podview.name(pod), podview.namespace(pod), podview.uid(pod), attempt),
        hostname=hostname,
        log_directory=pod_log_dir(pod_logs_dir, pod),
        port_mappings=tuple(ports),
        labels={**_str_map(podview.meta(pod).get("labels")), **pod_labels(pod)},
        annotations=annotations,
        host_network=podview.host_network(pod),
        host_pid=sp.get("hostPID") is True,
        host_ipc=sp.get("hostIPC") is True,
        cgroup_parent=cgroup_parent,
        resources=resources,
    )


def _security(c: Container, pod: Pod) -> tuple[int | None, int | None, bool, bool]:
    psc = podview.spec(pod).get("securityContext")
    csc = c.get("securityContext")
    psc = psc if isinstance(psc, dict) else {}
    csc = csc if isinstance(csc, dict) else {}

    def pick(key: str) -> int | None:
        v = csc.get(key, psc.get(key))
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return pick("runAsUser"), pick("runAsGroup"), csc.get("privileged") is True, csc.get("readOnlyRootFilesystem") is True


def container_config(
    pod: Pod,
    c: Container,
    *,
    restart_count: int,
    mounts: list[Mount],
    field_values: dict[str, str],
    resources: LinuxResources | None,
    termination_log_host_path: str,
    image_stop_signal: str = "",
    allocatable: Mapping[str, Fraction] | None = None,
) -> ContainerConfig:
    """Raises EnvSourceError for env it cannot resolve (-> CreateContainerConfigError)."""
    env = container_env(c, pod, field_values, allocatable)
    command, args = expand_command(c, env)
    name = str(c.get("name"))
    kind = podview.container_kind(pod, name) or "regular"
    tm_path = str(c.get("terminationMessagePath") or "/dev/termination-log")
    all_mounts = list(mounts)
    if tm_path and termination_log_host_path:
        all_mounts.append(Mount(container_path=tm_path, host_path=termination_log_host_path))
    run_as_user, run_as_group, privileged, ro_rootfs = _security(c, pod)
    lifecycle: dict[str, Any] = c.get("lifecycle") if isinstance(c.get("lifecycle"), dict) else {}  # type: ignore[assignment]
    stop_signal = str(lifecycle.get("stopSignal") or image_stop_signal or "")
    return ContainerConfig(
        metadata=ContainerMeta(name, restart_count),
        image=str(c.get("image")),
        command=tuple(command),
        args=tuple(args),
        working_dir=str(c.get("workingDir") or ""),
        envs=tuple(env),
        mounts=tuple(all_mounts),
        labels={**pod_labels(pod), LABEL_CONTAINER_NAME: name},
        annotations={
            ANNOTATION_HASH: podview.container_hash(c),
            ANNOTATION_RESTART_COUNT: str(restart_count),
            ANNOTATION_TERMINATION_MESSAGE_PATH: tm_path,
            ANNOTATION_TERMINATION_MESSAGE_POLICY: str(c.get("terminationMessagePolicy") or "File"),
            ANNOTATION_CONTAINER_KIND: kind,
            ANNOTATION_GRACE_PERIOD: str(podview.grace_period(pod)),
        },
        log_path=os.path.join(name, f"{restart_count}.log"),
        stdin=c.get("stdin") is True,
        stdin_once=c.get("stdinOnce") is True,
        tty=c.get("tty") is True,
        resources=resources,
        stop_signal=stop_signal,
        privileged=privileged,
        run_as_user=run_as_user,
        run_as_group=run_as_group,
        readonly_rootfs=ro_rootfs,
    )
