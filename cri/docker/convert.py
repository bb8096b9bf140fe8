"""Docker API JSON -> CRI-shaped dataclasses (pure functions; cri-dockerd's interpretation)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cri.docker.imageref import image_ref_for
from cri.docker.naming import (
    CONTAINER_TYPE_SANDBOX,
    LABEL_CONTAINER_TYPE,
    LABEL_LOG_PATH,
    LABEL_SANDBOX_ID,
    NameError_,
    parse_name,
)
from cri.types import (
    LABEL_CONTAINER_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    ContainerEvent,
    ContainerEventType,
    ContainerMeta,
    ContainerState,
    ContainerStats,
    ContainerStatus,
    Image,
    LinuxResources,
    PodMeta,
    PodSandboxStatus,
    SandboxState,
)

from .naming import extract_labels

_TIME = re.compile(r"^(?P<base>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d+))?(?P<tz>Z|[+-]\d{2}:\d{2})$")
EVENT_TYPES = {
    "create": ContainerEventType.CREATED,
    "start": ContainerEventType.STARTED,
    "die": ContainerEventType.STOPPED,
    "destroy": ContainerEventType.DELETED,
}


def parse_docker_time(value: str | None) -> float:
    """RFC 3339 with nanoseconds -> epoch seconds; Go's zero time ("0001-01-01T00:00:00Z") -> 0."""
    if not value:
        return 0.0
    match = _TIME.match(value)
    if match is None:
        raise ValueError(f"unparseable Docker timestamp {value!r}")
    if match["base"].startswith("0001-01-01"):
        return 0.0
    tz = "+00:00" if match["tz"] == "Z" else match["tz"]
    whole = datetime.fromisoformat(match["base"] + tz).astimezone(UTC)
    frac = match["frac"] or ""
    return whole.timestamp() + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _labels(inspect: Mapping[str, Any]) -> dict[str, str]:
    return dict((inspect.get("Config") or {}).get("Labels") or {})


def _attempt(inspect: Mapping[str, Any]) -> int:
    try:
        return parse_name(str(inspect.get("Name", ""))).attempt
    except NameError_:
        return 0


def container_state_of(state: Mapping[str, Any], created_at: float) -> tuple[ContainerState, str, float, float]:
    """(state, reason, started_at, finished_at) following cri-dockerd's ContainerStatus."""
    started_at = parse_docker_time(state.get("StartedAt"))
    finished_at = parse_docker_time(state.get("FinishedAt"))
    exit_code = int(state.get("ExitCode") or 0)
    if state.get("Running"):
        return ContainerState.RUNNING, "", started_at, finished_at
    if finished_at:
        if state.get("OOMKilled"):
            reason = "OOMKilled"
        elif exit_code == 0:
            reason = "Completed"
        else:
            reason = "Error"
        return ContainerState.EXITED, reason, started_at, finished_at
    if exit_code != 0:
        # Never ran (e.g. the entrypoint does not exist): no finish time but an exit code.
        return ContainerState.EXITED, "ContainerCannotRun", created_at, created_at
    return ContainerState.CREATED, "", started_at, finished_at


def container_status(inspect: Mapping[str, Any], image_inspect: dict[str, Any] | None) -> ContainerStatus:
    docker_labels = _labels(inspect)
    labels, annotations = extract_labels(docker_labels)
    state = inspect.get("State") or {}
    created_at = parse_docker_time(inspect.get("Created"))
    cri_state, reason, started_at, finished_at = container_state_of(state, created_at)
    return ContainerStatus(
        id=str(inspect["Id"]),
        sandbox_id=docker_labels.get(LABEL_SANDBOX_ID, ""),
        metadata=ContainerMeta(name=docker_labels.get(LABEL_CONTAINER_NAME, ""), attempt=_attempt(inspect)),
        state=cri_state,
        image=_image_name(inspect, image_inspect),
        image_ref=image_ref_for(str(inspect.get("Image", "")), image_inspect),
        created_at=created_at,
        started_at=started_at,
        finished_at=finished_at,
        exit_code=int(state.get("ExitCode") or 0),
        reason=reason,
        message="" if cri_state is ContainerState.RUNNING else str(state.get("Error") or ""),
        labels=labels,
        annotations=annotations,
        log_path=docker_labels.get(LABEL_LOG_PATH, ""),
        pid=int(state.get("Pid") or 0),
        resources=container_resources(inspect.get("HostConfig") or {}),
    )


def container_resources(host_config: Mapping[str, Any]) -> LinuxResources:
    """The CPU and memory settings the Engine holds for the container (cri-dockerd's ContainerStatus resources),
    as `docker update` last changed them."""
    return LinuxResources(
        cpu_period=int(host_config.get("CpuPeriod") or 0),
        cpu_quota=int(host_config.get("CpuQuota") or 0),
        cpu_shares=int(host_config.get("CpuShares") or 0),
        memory_limit_bytes=int(host_config.get("Memory") or 0),
    )


def update_body(resources: LinuxResources) -> dict[str, int]:
    """`POST /containers/{id}/update`: the CPU fields, and the memory limit with the same swap limit (no swap
    on top of it, as at create)."""
    body = {"CpuPeriod": resources.cpu_period, "CpuQuota": resources.cpu_quota, "CpuShares": resources.cpu_shares}
    if resources.memory_limit_bytes > 0:
        body["Memory"] = body["MemorySwap"] = resources.memory_limit_bytes
    return body


def _image_name(inspect: Mapping[str, Any], image_inspect: Mapping[str, Any] | None) -> str:
    """As cri-dockerd reports it: the image's first repo tag, else what the container was created from."""
    tags = (image_inspect or {}).get("RepoTags") or []
    if tags and isinstance(tags[0], str):
        return tags[0]
    return str((inspect.get("Config") or {}).get("Image", ""))


def sandbox_ip(inspect: Mapping[str, Any]) -> str:
    host_config = inspect.get("HostConfig") or {}
    if host_config.get("NetworkMode") == "host":
        # The node's addresses are the pod's; the kubelet fills them in, not the runtime.
        return ""
    settings = inspect.get("NetworkSettings") or {}
    ip = str(settings.get("IPAddress") or settings.get("GlobalIPv6Address") or "")
    if ip:
        return ip
    for network in (settings.get("Networks") or {}).values():
        if network and network.get("IPAddress"):
            return str(network["IPAddress"])
    return ""


def sandbox_additional_ips(inspect: Mapping[str, Any], primary: str) -> tuple[str, ...]:
    """The other family's address of a dual-stack sandbox (cri-dockerd: additionalIps)."""
    if not primary:
        return ()
    out: list[str] = []
    for network in ((inspect.get("NetworkSettings") or {}).get("Networks") or {}).values():
        for key in ("IPAddress", "GlobalIPv6Address"):
            ip = str((network or {}).get(key) or "")
            if ip and ip != primary and ip not in out:
                out.append(ip)
    return tuple(out)


def sandbox_status(inspect: Mapping[str, Any]) -> PodSandboxStatus:
    docker_labels = _labels(inspect)
    labels, annotations = extract_labels(docker_labels)
    state = inspect.get("State") or {}
    running = bool(state.get("Running"))
    pid = int(state.get("Pid") or 0)
    ip = sandbox_ip(inspect) if running else ""
    return PodSandboxStatus(
        id=str(inspect["Id"]),
        metadata=PodMeta(
            name=docker_labels.get(LABEL_POD_NAME, ""),
            namespace=docker_labels.get(LABEL_POD_NAMESPACE, ""),
            uid=docker_labels.get(LABEL_POD_UID, ""),
            attempt=_attempt(inspect),
        ),
        state=SandboxState.READY if running else SandboxState.NOTREADY,
        created_at=parse_docker_time(inspect.get("Created")),
        ip=ip,
        additional_ips=sandbox_additional_ips(inspect, ip),
        labels=labels,
        annotations=annotations,
        network_namespace=f"/proc/{pid}/ns/net" if running and pid else "",
    )


def container_event(message: Mapping[str, Any]) -> ContainerEvent | None:
    """One Docker event-stream message -> ContainerEvent, or None if it is not ours."""
    if message.get("Type") != "container":
        return None
    event_type = EVENT_TYPES.get(str(message.get("Action") or message.get("status") or ""))
    actor = message.get("Actor") or {}
    attributes = actor.get("Attributes") or {}
    if event_type is None or LABEL_CONTAINER_TYPE not in attributes:
        return None
    time_nano = message.get("timeNano")
    timestamp = int(time_nano) / 1e9 if time_nano else float(message.get("time") or 0)
    return ContainerEvent(
        container_id=str(actor.get("ID") or message.get("id") or ""),
        type=event_type,
        timestamp=timestamp,
        pod_uid=str(attributes.get(LABEL_POD_UID, "")),
        is_sandbox=attributes.get(LABEL_CONTAINER_TYPE) == CONTAINER_TYPE_SANDBOX,
    )


def writable_layer(listed: Mapping[str, Any], data_root: str, now: float) -> ContainerStats | None:
    """cri-dockerd's ContainerStats.writable_layer: `SizeRw` of a container listed with size=1 (bytes only:
    Docker counts no inodes). The list leaves out a SizeRw of 0 (omitempty)."""
    if not listed.get("Id"):
        return None
    size = listed.get("SizeRw") or 0
    return ContainerStats(container_id=str(listed["Id"]), timestamp=now, writable_layer_used_bytes=max(0, int(size)),
                          writable_layer_mountpoint=data_root, writable_layer_timestamp=now)


def container_stats(container_id: str, stats: Mapping[str, Any]) -> ContainerStats:
    memory = stats.get("memory_stats") or {}
    memory_detail = memory.get("stats") or {}
    usage = int(memory.get("usage") or 0)
    # cgroup v1 reports the hierarchical total_inactive_file; v2 only has inactive_file.
    inactive = memory_detail.get("total_inactive_file", memory_detail.get("inactive_file", 0))
    cpu = (stats.get("cpu_stats") or {}).get("cpu_usage") or {}
    return ContainerStats(
        container_id=container_id,
        timestamp=parse_docker_time(stats.get("read")),
        cpu_usage_core_nanoseconds=int(cpu.get("total_usage") or 0),
        memory_working_set_bytes=max(0, usage - int(inactive or 0)),
        memory_usage_bytes=usage,
    )


def image_from_inspect(inspect: Mapping[str, Any]) -> Image:
    config = inspect.get("Config") or {}
    return Image(
        id=str(inspect["Id"]),
        repo_tags=tuple(inspect.get("RepoTags") or ()),
        repo_digests=tuple(inspect.get("RepoDigests") or ()),
        size=int(inspect.get("Size") or 0),
        stop_signal=str(config.get("StopSignal") or ""),
        user=str(config.get("User") or ""),
    )


def image_from_summary(summary: Mapping[str, Any]) -> Image:
    """From `GET /images/json`, which carries no config (stop signal, user)."""
    return Image(
        id=str(summary["Id"]),
        repo_tags=tuple(tag for tag in summary.get("RepoTags") or () if tag != "<none>:<none>"),
        repo_digests=tuple(d for d in summary.get("RepoDigests") or () if d != "<none>@<none>"),
        size=int(summary.get("Size") or 0),
    )


def demux_stream(data: bytes) -> tuple[bytes, bytes, bytes]:
    """Split Docker's multiplexed stream (8-byte frame headers) into (stdout, stderr, both in order)."""
    out, err, both = bytearray(), bytearray(), bytearray()
    offset = 0
    while offset + 8 <= len(data):
        kind = data[offset]
        size = int.from_bytes(data[offset + 4 : offset + 8], "big")
        chunk = data[offset + 8 : offset + 8 + size]
        offset += 8 + size
        (err if kind == 2 else out).extend(chunk)
        both.extend(chunk)
    return bytes(out), bytes(err), bytes(both)
