"""CRI sandbox/container configs -> Docker `POST /containers/create` bodies (cri-dockerd semantics)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cri.docker.naming import container_labels, sandbox_labels
from cri.docker.security import ConfigError as ConfigError
from cri.docker.security import container_security_fields, sandbox_security_fields, sandbox_user, user_spec
from cri.types import ContainerConfig, LinuxResources, Mount, PodSandboxConfig, PortMapping

# cri-dockerd gives the pause container the minimum weight; it only holds namespaces.
SANDBOX_CPU_SHARES = 2
LOG_DRIVER = "json-file"
LOG_CONFIG = {"Type": LOG_DRIVER, "Config": {}}
_PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
_PROPAGATION = {"private": "", "rslave": "rslave", "rshared": "rshared"}


def port_bindings(
    mappings: tuple[PortMapping, ...],
) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, str]]]]:
    """(ExposedPorts, PortBindings); mappings without a host port need no Docker binding."""
    exposed: dict[str, dict[str, Any]] = {}
    bindings: dict[str, list[dict[str, str]]] = {}
    for mapping in mappings:
        if mapping.host_port == 0:
            continue
        key = f"{mapping.container_port}/{_PROTOCOLS.get(mapping.protocol.upper(), 'tcp')}"
        exposed[key] = {}
        bindings.setdefault(key, []).append({"HostIp": mapping.host_ip, "HostPort": str(mapping.host_port)})
    return exposed, bindings


def mount_binds(mounts: tuple[Mount, ...]) -> list[str]:
    binds = []
    for mount in mounts:
        attrs = []
        if mount.readonly:
            attrs.append("ro")
        propagation = _PROPAGATION.get(mount.propagation, "")
        if propagation:
            attrs.append(propagation)
        bind = f"{mount.host_path}:{mount.container_path}"
        binds.append(f"{bind}:{','.join(attrs)}" if attrs else bind)
    return binds


def resource_fields(resources: LinuxResources | None) -> dict[str, int]:
    if resources is None:
        return {}
    fields: dict[str, int] = {}
    if resources.cpu_shares:
        fields["CpuShares"] = resources.cpu_shares
    if resources.cpu_quota:
        fields["CpuQuota"] = resources.cpu_quota
    if resources.cpu_period:
        fields["CpuPeriod"] = resources.cpu_period
    if resources.memory_limit_bytes:
        # Memory == MemorySwap: no swap on top of the limit, as cri-dockerd does.
        fields["Memory"] = resources.memory_limit_bytes
        fields["MemorySwap"] = resources.memory_limit_bytes
    if resources.oom_score_adj:
        fields["OomScoreAdj"] = resources.oom_score_adj
    if resources.pids_limit > 0:
        fields["PidsLimit"] = resources.pids_limit
    return fields


def sandbox_create_body(config: PodSandboxConfig, image: str, network: str = "default") -> dict[str, Any]:
    """`network`: the Docker network of pod sandboxes that do not use the host's."""
    exposed, bindings = port_bindings(config.port_mappings)
    host_config: dict[str, Any] = {
        "NetworkMode": "host" if config.host_network else network,
        "IpcMode": "host" if config.host_ipc else "shareable",
        "RestartPolicy": {"Name": "no"},
        "LogConfig": LOG_CONFIG,
        "CpuShares": SANDBOX_CPU_SHARES,
        "PortBindings": bindings,
    }
    if config.host_pid:
        host_config["PidMode"] = "host"
    if config.cgroup_parent:
        host_config["CgroupParent"] = config.cgroup_parent
    if config.dns is not None:
        host_config["Dns"] = list(config.dns.servers)
        host_config["DnsSearch"] = list(config.dns.searches)
        host_config["DnsOptions"] = list(config.dns.options)
    if config.resources is not None and config.resources.oom_score_adj:
        host_config["OomScoreAdj"] = config.resources.oom_score_adj
    host_config.update(sandbox_security_fields(config))
    body: dict[str, Any] = {
        "Image": image,
        "Labels": sandbox_labels(config),
        "ExposedPorts": exposed,
        "HostConfig": host_config,
    }
    if user := sandbox_user(config):
        body["User"] = user
    # Docker rejects a hostname together with host networking ("conflicting options").
    if config.hostname and not config.host_network:
        body["Hostname"] = config.hostname
    return body


def container_log_path(sandbox_config: PodSandboxConfig, config: ContainerConfig) -> str:
    if not sandbox_config.log_directory or not config.log_path:
        return ""
    return f"{sandbox_config.log_directory.rstrip('/')}/{config.log_path}"


def log_options(max_size: int, max_files: int) -> dict[str, str]:
    """json-file rotation: Docker keeps at most `max_files` files of `max_size` bytes (0: unbounded)."""
    if max_size <= 0:
        return {}
    return {"max-size": str(max_size), "max-file": str(max(max_files, 1))}


def container_create_body(sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig,
                          log_opts: Mapping[str, str] | None = None) -> dict[str, Any]:
    joined = f"container:{sandbox_id}"
    host_config: dict[str, Any] = {
        "Binds": mount_binds(config.mounts),
        "RestartPolicy": {"Name": "no"},
        "NetworkMode": joined,
        "IpcMode": joined,
        "LogConfig": {"Type": LOG_DRIVER, "Config": dict(log_opts or {})},
        **resource_fields(config.resources),
        **container_security_fields(sandbox_id, config.security, sandbox_config, config.pid_target_id),
    }
    if sandbox_config.host_network:
        host_config["UTSMode"] = "host"
    if sandbox_config.cgroup_parent:
        host_config["CgroupParent"] = sandbox_config.cgroup_parent
    body: dict[str, Any] = {
        "Image": config.image,
        # null, not [], keeps the image default: Docker only merges the image CMD when the
        # entrypoint is unset, which is exactly Kubernetes' command/args rule.
        "Entrypoint": list(config.command) or None,
        "Cmd": list(config.args) or None,
        "Env": [f"{key}={value}" for key, value in config.envs],
        "WorkingDir": config.working_dir,
        "Labels": container_labels(sandbox_id, config, sandbox_config, container_log_path(sandbox_config, config)),
        "OpenStdin": config.stdin,
        "StdinOnce": config.stdin_once,
        "Tty": config.tty,
        "User": user_spec(config.security.run_as_user, config.security.run_as_username, config.security.run_as_group),
        "Healthcheck": {"Test": ["NONE"]},
        "HostConfig": host_config,
    }
    if config.stop_signal:
        body["StopSignal"] = config.stop_signal
    return body
