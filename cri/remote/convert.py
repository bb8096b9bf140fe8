"""The agent's CRI-shaped dataclasses <-> CRI v1 protobuf messages (pure functions).

The kubelet's own labels (pod name, namespace, uid, container name) are added here, as kuberuntime's
newPodLabels/newContainerLabels do: a CRI runtime stores labels and annotations as given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from cri.remote.v1 import api_pb2 as pb
from cri.types import (
    LABEL_CONTAINER_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    AuthConfig,
    ContainerConfig,
    ContainerMeta,
    ContainerState,
    ContainerStats,
    ContainerStatus,
    Image,
    LinuxContainerSecurityContext,
    LinuxResources,
    Mount,
    ObjectSummary,
    PodMeta,
    PodSandboxConfig,
    PodSandboxStatus,
    SandboxState,
    SecurityProfile,
)

_NS = 1e9
_PROPAGATION = {
    "private": pb.PROPAGATION_PRIVATE,
    "rslave": pb.PROPAGATION_HOST_TO_CONTAINER,
    "rshared": pb.PROPAGATION_BIDIRECTIONAL,
}
_PROTOCOL = {"TCP": pb.TCP, "UDP": pb.UDP, "SCTP": pb.SCTP}
_PROFILE = {
    "RuntimeDefault": pb.SecurityProfile.RuntimeDefault,
    "Unconfined": pb.SecurityProfile.Unconfined,
    "Localhost": pb.SecurityProfile.Localhost,
}
_CONTAINER_STATE = {
    pb.CONTAINER_CREATED: ContainerState.CREATED,
    pb.CONTAINER_RUNNING: ContainerState.RUNNING,
    pb.CONTAINER_EXITED: ContainerState.EXITED,
    pb.CONTAINER_UNKNOWN: ContainerState.UNKNOWN,
}
# The short state words of `list_summaries`, the same as DockerRuntime's (compared only for equality).
_SUMMARY_STATE = {
    pb.CONTAINER_CREATED: "created",
    pb.CONTAINER_RUNNING: "running",
    pb.CONTAINER_EXITED: "exited",
    pb.CONTAINER_UNKNOWN: "unknown",
}


class ConfigError(ValueError):
    """The agent asked for something CRI cannot express (-> CreateContainerError)."""


def seconds(nanoseconds: int) -> float:
    return nanoseconds / _NS if nanoseconds > 0 else 0.0


# -- labels -------------------------------------------------------------------------------------


def pod_labels(meta: PodMeta) -> dict[str, str]:
    return {LABEL_POD_NAME: meta.name, LABEL_POD_NAMESPACE: meta.namespace, LABEL_POD_UID: meta.uid}


def sandbox_labels(config: PodSandboxConfig) -> dict[str, str]:
    return {**config.labels, **pod_labels(config.metadata)}


def container_labels(config: ContainerConfig, sandbox: PodSandboxConfig) -> dict[str, str]:
    return {**config.labels, **pod_labels(sandbox.metadata), LABEL_CONTAINER_NAME: config.metadata.name}


# -- requests -----------------------------------------------------------------------------------


def resources(res: LinuxResources) -> pb.LinuxContainerResources:
    return pb.LinuxContainerResources(
        cpu_period=res.cpu_period,
        cpu_quota=res.cpu_quota,
        cpu_shares=res.cpu_shares,
        memory_limit_in_bytes=res.memory_limit_bytes,
        oom_score_adj=res.oom_score_adj,
    )


def security_profile(profile: SecurityProfile) -> pb.SecurityProfile:
    if profile.profile_type not in _PROFILE:
        raise ConfigError(f"unknown security profile type {profile.profile_type!r}")
    return pb.SecurityProfile(profile_type=_PROFILE[profile.profile_type], localhost_ref=profile.localhost_ref)


def _namespaces(config: PodSandboxConfig, *, container: bool) -> pb.NamespaceOption:
    if config.host_pid:
        pid = pb.NODE
    elif config.share_process_namespace or not container:
        pid = pb.POD
    else:
        pid = pb.CONTAINER
    return pb.NamespaceOption(
        network=pb.NODE if config.host_network else pb.POD,
        pid=pid,
        ipc=pb.NODE if config.host_ipc else pb.POD,
    )


def sandbox_config(config: PodSandboxConfig) -> pb.PodSandboxConfig:
    meta = config.metadata
    sec = config.security
    sandbox_security = pb.LinuxSandboxSecurityContext(
        namespace_options=_namespaces(config, container=False),
        supplemental_groups=list(sec.supplemental_groups),
        privileged=sec.privileged,
        # The pause container needs no syscalls beyond the runtime default, as kuberuntime asks.
        seccomp=pb.SecurityProfile(profile_type=pb.SecurityProfile.RuntimeDefault),
    )
    if sec.run_as_user is not None:
        sandbox_security.run_as_user.value = sec.run_as_user
    if sec.run_as_group is not None:
        sandbox_security.run_as_group.value = sec.run_as_group
    linux = pb.LinuxPodSandboxConfig(
        cgroup_parent=config.cgroup_parent,
        security_context=sandbox_security,
        sysctls=dict(config.sysctls),
    )
    if config.resources is not None:
        linux.resources.CopyFrom(resources(config.resources))
    out = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=meta.name, uid=meta.uid, namespace=meta.namespace, attempt=meta.attempt),
        hostname=config.hostname,
        log_directory=config.log_directory,
        port_mappings=[
            pb.PortMapping(protocol=_PROTOCOL.get(p.protocol, pb.TCP), container_port=p.container_port,
                           host_port=p.host_port, host_ip=p.host_ip)
            for p in config.port_mappings
        ],
        labels=sandbox_labels(config),
        annotations=dict(config.annotations),
        linux=linux,
    )
    if config.dns is not None:
        out.dns_config.CopyFrom(pb.DNSConfig(
            servers=list(config.dns.servers), searches=list(config.dns.searches), options=list(config.dns.options)))
    return out


def mount(m: Mount) -> pb.Mount:
    if m.propagation not in _PROPAGATION:
        raise ConfigError(f"unknown mount propagation {m.propagation!r} for {m.container_path}")
    return pb.Mount(container_path=m.container_path, host_path=m.host_path, readonly=m.readonly,
                    propagation=_PROPAGATION[m.propagation])


def container_security(sec: LinuxContainerSecurityContext, sandbox: PodSandboxConfig,
                       pid_target_id: str = "") -> pb.LinuxContainerSecurityContext:
    namespaces = _namespaces(sandbox, container=True)
    if pid_target_id and namespaces.pid == pb.CONTAINER:
        # as kuberuntime: an ephemeral container's target only replaces a container-private PID namespace
        namespaces.pid = pb.TARGET
        namespaces.target_id = pid_target_id
    out = pb.LinuxContainerSecurityContext(
        capabilities=pb.Capability(add_capabilities=list(sec.capabilities_add),
                                   drop_capabilities=list(sec.capabilities_drop)),
        privileged=sec.privileged,
        namespace_options=namespaces,
        run_as_username=sec.run_as_username,
        readonly_rootfs=sec.readonly_rootfs,
        supplemental_groups=list(sec.supplemental_groups),
        no_new_privs=sec.no_new_privs,
        seccomp=security_profile(sec.seccomp),
    )
    if sec.run_as_user is not None:
        out.run_as_user.value = sec.run_as_user
    if sec.run_as_group is not None:
        out.run_as_group.value = sec.run_as_group
    # An empty list would mean the runtime's defaults in proto3; kuberuntime sends the defaults itself.
    if sec.masked_paths is not None:
        out.masked_paths.extend(sec.masked_paths)
    if sec.readonly_paths is not None:
        out.readonly_paths.extend(sec.readonly_paths)
    if sec.apparmor is not None:
        out.apparmor.CopyFrom(security_profile(sec.apparmor))
    return out


def stop_signal(name: str) -> int:
    if not name:
        return pb.RUNTIME_DEFAULT
    wanted = name if name.startswith("SIG") else f"SIG{name}"
    try:
        return pb.Signal.Value(wanted)
    except ValueError:
        raise ConfigError(f"unknown stop signal {name!r}") from None


def container_config(config: ContainerConfig, sandbox: PodSandboxConfig) -> pb.ContainerConfig:
    linux = pb.LinuxContainerConfig(security_context=container_security(config.security, sandbox,
                                                                        config.pid_target_id))
    if config.resources is not None:
        linux.resources.CopyFrom(resources(config.resources))
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=config.metadata.name, attempt=config.metadata.attempt),
        image=pb.ImageSpec(image=config.image),
        command=list(config.command),
        args=list(config.args),
        working_dir=config.working_dir,
        envs=[pb.KeyValue(key=k, value=v.encode("utf-8", "surrogateescape")) for k, v in config.envs],
        mounts=[mount(m) for m in config.mounts],
        labels=container_labels(config, sandbox),
        annotations=dict(config.annotations),
        log_path=config.log_path,
        stdin=config.stdin,
        stdin_once=config.stdin_once,
        tty=config.tty,
        linux=linux,
        stop_signal=stop_signal(config.stop_signal),  # type: ignore[arg-type]
    )


def auth_config(auth: AuthConfig | None) -> pb.AuthConfig | None:
    if auth is None:
        return None
    return pb.AuthConfig(username=auth.username, password=auth.password, auth=auth.auth,
                         server_address=auth.server_address, identity_token=auth.identity_token)


# -- responses ----------------------------------------------------------------------------------


def _interned(pairs: Mapping[str, str]) -> dict[str, str]:
    """Labels or annotations with each key and value interned: every pod's objects carry the same keys and each
    object of a pod the same uid, name and namespace, and the agent keeps several decoded copies of each object
    (the pod cache, the stats pass, the relist); protobuf decodes a new string for each at every call."""
    return {sys.intern(k): sys.intern(v) for k, v in pairs.items()}


def pod_meta(meta: pb.PodSandboxMetadata) -> PodMeta:
    return PodMeta(name=meta.name, namespace=meta.namespace, uid=meta.uid, attempt=meta.attempt)


def sandbox_status(status: pb.PodSandboxStatus, info: Mapping[str, str] | None = None) -> PodSandboxStatus:
    ready = status.state == pb.SANDBOX_READY
    network = status.network
    host_network = status.linux.namespaces.options.network == pb.NODE
    netns = ""
    if ready and info is not None:
        netns = network_namespace_of(info)
    return PodSandboxStatus(
        id=status.id,
        metadata=pod_meta(status.metadata),
        state=SandboxState.READY if ready else SandboxState.NOTREADY,
        created_at=seconds(status.created_at),
        # As with Docker: for a host-network pod the kubelet fills in the node's addresses itself.
        ip=network.ip if ready and not host_network else "",
        additional_ips=tuple(a.ip for a in network.additional_ips) if ready and not host_network else (),
        labels=_interned(status.labels),
        annotations=_interned(status.annotations),
        network_namespace=netns,
    )


def network_namespace_of(info: Mapping[str, str]) -> str:
    """The sandbox's netns from containerd's verbose info: `/proc/<pause pid>/ns/net`, as DockerRuntime gives it
    (the stats reader reads that process's `net/dev`), else the namespace path in its runtime spec."""
    raw = info.get("info")
    if not raw:
        return ""
    try:
        data = json.loads(raw)
    except ValueError:
        return ""
    pid = int(data.get("pid") or 0)
    if pid:
        return f"/proc/{pid}/ns/net"
    for ns in (((data.get("runtimeSpec") or {}).get("linux") or {}).get("namespaces") or []):
        if ns.get("type") == "network" and ns.get("path"):
            return str(ns["path"])
    return ""


def sandbox_item(item: pb.PodSandbox) -> PodSandboxStatus:
    return PodSandboxStatus(
        id=item.id,
        metadata=pod_meta(item.metadata),
        state=SandboxState.READY if item.state == pb.SANDBOX_READY else SandboxState.NOTREADY,
        created_at=seconds(item.created_at),
        labels=_interned(item.labels),
        annotations=_interned(item.annotations),
    )


def container_state(state: int) -> ContainerState:
    return _CONTAINER_STATE.get(state, ContainerState.UNKNOWN)  # type: ignore[call-overload,no-any-return]


def container_status(status: pb.ContainerStatus, sandbox_id: str) -> ContainerStatus:
    labels = _interned(status.labels)
    return ContainerStatus(
        id=status.id,
        sandbox_id=sandbox_id,
        metadata=ContainerMeta(name=status.metadata.name, attempt=status.metadata.attempt),
        state=container_state(status.state),
        image=status.image.image,
        image_ref=status.image_ref,
        created_at=seconds(status.created_at),
        started_at=seconds(status.started_at),
        finished_at=seconds(status.finished_at),
        exit_code=status.exit_code,
        reason=status.reason,
        message=status.message,
        labels=labels,
        annotations=_interned(status.annotations),
        log_path=status.log_path,
        resources=status_resources(status),
    )


def status_resources(status: pb.ContainerStatus) -> LinuxResources | None:
    """ContainerStatus.resources.linux: what the runtime says the container runs with (None when it does not)."""
    if not status.HasField("resources") or not status.resources.HasField("linux"):
        return None
    linux = status.resources.linux
    return LinuxResources(cpu_period=linux.cpu_period, cpu_quota=linux.cpu_quota, cpu_shares=linux.cpu_shares,
                          memory_limit_bytes=linux.memory_limit_in_bytes)


def summary_of_sandbox(item: pb.PodSandbox) -> ObjectSummary:
    labels = _interned(item.labels)
    return ObjectSummary(id=item.id, pod_uid=labels.get(LABEL_POD_UID, item.metadata.uid),
                         state="running" if item.state == pb.SANDBOX_READY else "exited",
                         is_sandbox=True, labels=labels)


def summary_of_container(item: pb.Container) -> ObjectSummary:
    labels = _interned(item.labels)
    return ObjectSummary(id=item.id, pod_uid=labels.get(LABEL_POD_UID, ""),
                         state=_SUMMARY_STATE.get(item.state, "unknown"),
                         is_sandbox=False, labels=labels)


def image(img: pb.Image) -> Image:
    user = img.username or (str(img.uid.value) if img.HasField("uid") else "")
    return Image(id=img.id, repo_tags=tuple(img.repo_tags), repo_digests=tuple(img.repo_digests),
                 size=img.size, user=user)


def container_stats(stats: pb.ContainerStats) -> ContainerStats:
    cpu, memory = stats.cpu, stats.memory
    timestamp = max(cpu.timestamp, memory.timestamp)
    return ContainerStats(
        container_id=stats.attributes.id,
        timestamp=seconds(timestamp),
        cpu_usage_core_nanoseconds=cpu.usage_core_nano_seconds.value,
        memory_working_set_bytes=memory.working_set_bytes.value,
        memory_usage_bytes=memory.usage_bytes.value,
        **_writable_layer(stats),
    )


def _writable_layer(stats: pb.ContainerStats) -> dict[str, Any]:
    if not stats.HasField("writable_layer"):
        return {}
    layer = stats.writable_layer
    return {
        "writable_layer_used_bytes": layer.used_bytes.value if layer.HasField("used_bytes") else None,
        "writable_layer_inodes_used": layer.inodes_used.value if layer.HasField("inodes_used") else None,
        "writable_layer_mountpoint": layer.fs_id.mountpoint,
        "writable_layer_timestamp": seconds(layer.timestamp),
    }
