"""Translate a pod and one of its containers into the runtime's sandbox and container configs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from fractions import Fraction

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
    DNSConfig,
    LinuxResources,
    Mount,
    PodMeta,
    PodSandboxConfig,
    PortMapping,
)
from minikubelet.api.expansion import container_env, expand_command
from minikubelet.api.pod_objects import PodObjects
from minikubelet.base.podview import ContainerView, PodView
from minikubelet.worker.hosts import sandbox_hostname
from minikubelet.worker.security_context import (
    DEFAULT_OPTIONS,
    SecurityOptions,
    container_security,
    pod_sysctls,
    sandbox_security,
    shares_process_namespace,
)


def pod_labels(pod: PodView) -> dict[str, str]:
    return {
        LABEL_POD_NAME: pod.name,
        LABEL_POD_NAMESPACE: pod.namespace,
        LABEL_POD_UID: pod.uid,
    }


def pod_log_dir(pod_logs_dir: str, pod: PodView) -> str:
    return os.path.join(pod_logs_dir, f"{pod.namespace}_{pod.name}_{pod.uid}")


def sandbox_config(
    pod: PodView, attempt: int, pod_logs_dir: str, cgroup_parent: str = "", resources: LinuxResources | None = None,
    *, dns: DNSConfig | None = None, cluster_domain: str = "",
) -> PodSandboxConfig:
    """Raises HostnameError when the pod's hostname cannot be formed."""
    hostname = sandbox_hostname(pod, cluster_domain)
    ports = [
        PortMapping(container_port=p.container_port, protocol=p.protocol, host_port=p.host_port, host_ip=p.host_ip)
        for c in pod.containers
        for p in c.ports
        if p.host_port > 0
    ]
    annotations = dict(pod.annotations)
    annotations[ANNOTATION_GRACE_PERIOD] = str(pod.grace_period)
    return PodSandboxConfig(
        metadata=PodMeta(pod.name, pod.namespace, pod.uid, attempt),
        hostname=hostname,
        dns=dns,
        log_directory=pod_log_dir(pod_logs_dir, pod),
        port_mappings=tuple(ports),
        labels={**pod.labels, **pod_labels(pod)},
        annotations=annotations,
        host_network=pod.host_network,
        host_pid=pod.host_pid,
        host_ipc=pod.host_ipc,
        cgroup_parent=cgroup_parent,
        resources=resources,
        share_process_namespace=shares_process_namespace(pod),
        sysctls=pod_sysctls(pod),
        security=sandbox_security(pod),
    )


def container_config(
    pod: PodView,
    c: ContainerView,
    *,
    restart_count: int,
    mounts: list[Mount],
    field_values: dict[str, str],
    resources: LinuxResources | None,
    termination_log_host_path: str,
    image_stop_signal: str = "",
    allocatable: Mapping[str, Fraction] | None = None,
    image_user: str = "",
    security_options: SecurityOptions = DEFAULT_OPTIONS,
    objects: PodObjects | None = None,
) -> ContainerConfig:
    """Raises EnvSourceError for env it cannot resolve and SecurityContextError for a security context it
    cannot apply (both -> CreateContainerConfigError)."""
    env = container_env(c.raw, pod.raw, field_values, allocatable, objects)
    command, args = expand_command(c.raw, env)
    name = c.name
    tm_path = c.termination_message_path
    all_mounts = list(mounts)
    if tm_path and termination_log_host_path:
        all_mounts.append(Mount(container_path=tm_path, host_path=termination_log_host_path))
    security = container_security(pod, c, image_user, security_options)
    return ContainerConfig(
        metadata=ContainerMeta(name, restart_count),
        image=c.image,
        command=tuple(command),
        args=tuple(args),
        working_dir=c.working_dir,
        envs=tuple(env),
        mounts=tuple(all_mounts),
        labels={**pod_labels(pod), LABEL_CONTAINER_NAME: name},
        annotations={
            ANNOTATION_HASH: c.spec_hash,
            ANNOTATION_RESTART_COUNT: str(restart_count),
            ANNOTATION_TERMINATION_MESSAGE_PATH: tm_path,
            ANNOTATION_TERMINATION_MESSAGE_POLICY: c.termination_message_policy,
            ANNOTATION_CONTAINER_KIND: c.kind,
            ANNOTATION_GRACE_PERIOD: str(pod.grace_period),
        },
        log_path=os.path.join(name, f"{restart_count}.log"),
        stdin=c.stdin,
        stdin_once=c.stdin_once,
        tty=c.tty,
        resources=resources,
        stop_signal=c.stop_signal or image_stop_signal or "",
        security=security,
    )
