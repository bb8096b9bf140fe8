"""Runtime-neutral data shapes, modelled on the Kubernetes CRI (runtime/v1 api.proto).

Plain dataclasses so the pure planner and status code can consume them without a runtime.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class SandboxState(enum.Enum):
    READY = "SANDBOX_READY"
    NOTREADY = "SANDBOX_NOTREADY"


class ContainerState(enum.Enum):
    CREATED = "CONTAINER_CREATED"
    RUNNING = "CONTAINER_RUNNING"
    EXITED = "CONTAINER_EXITED"
    UNKNOWN = "CONTAINER_UNKNOWN"


# Label keys the upstream kubelet puts on every sandbox/container (pkg/kubelet/types/labels.go).
LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_POD_UID = "io.kubernetes.pod.uid"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"
# Annotations the kubelet keeps on containers (kuberuntime/labels.go); Docker stores them as labels.
ANNOTATION_HASH = "io.kubernetes.container.hash"
ANNOTATION_RESTART_COUNT = "io.kubernetes.container.restartCount"
ANNOTATION_TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
ANNOTATION_TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"
ANNOTATION_GRACE_PERIOD = "io.kubernetes.pod.terminationGracePeriod"
ANNOTATION_CONTAINER_KIND = "minikubelet.io/container-kind"  # "init" | "sidecar" | "regular" | "ephemeral"


@dataclass(frozen=True)
class RuntimeVersion:
    """CRI VersionResponse: what the runtime says it is."""

    runtime_name: str  # "docker", "containerd", ...
    runtime_version: str
    runtime_api_version: str

    @property
    def container_id_scheme(self) -> str:
        """The prefix of status containerID, as the kubelet builds it from the runtime name ("docker://")."""
        return f"{self.runtime_name}://"


@dataclass(frozen=True)
class RuntimeConfig:
    """CRI RuntimeConfigResponse (its Linux part): how the runtime is set up."""

    cgroup_driver: str  # "systemd" | "cgroupfs"
    image_fs_path: str = ""  # where the runtime keeps images (cri-dockerd ImageFsInfo: Docker's data root)
    # ImageFsInfo's container_filesystems, when the runtime keeps writable layers apart from images (KEP-4191)
    container_fs_path: str = ""


@dataclass(frozen=True)
class PodMeta:
    name: str
    namespace: str
    uid: str
    attempt: int = 0


@dataclass(frozen=True)
class ContainerMeta:
    name: str
    attempt: int = 0


@dataclass(frozen=True)
class PortMapping:
    container_port: int
    protocol: str = "TCP"  # TCP | UDP | SCTP
    host_port: int = 0
    host_ip: str = ""


@dataclass(frozen=True)
class DNSConfig:
    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class LinuxResources:
    cpu_period: int = 0  # microseconds; 0 = unset
    cpu_quota: int = 0  # microseconds; 0 = unlimited
    cpu_shares: int = 0  # 0 = runtime default
    memory_limit_bytes: int = 0  # 0 = unlimited
    oom_score_adj: int = 0
    pids_limit: int = 0  # 0 = unlimited


@dataclass(frozen=True)
class SecurityProfile:
    """CRI SecurityProfile, for seccomp and AppArmor."""

    profile_type: str  # "RuntimeDefault" | "Unconfined" | "Localhost"
    localhost_ref: str = ""  # seccomp: the profile's absolute path; AppArmor: the profile's name


UNCONFINED = SecurityProfile("Unconfined")


@dataclass(frozen=True)
class LinuxSandboxSecurityContext:
    privileged: bool = False  # some container of the pod is privileged
    run_as_user: int | None = None
    run_as_group: int | None = None
    supplemental_groups: tuple[int, ...] = ()


@dataclass(frozen=True)
class LinuxContainerSecurityContext:
    privileged: bool = False
    run_as_user: int | None = None
    run_as_username: str = ""  # the image's user by name, when no uid applies
    run_as_group: int | None = None
    supplemental_groups: tuple[int, ...] = ()
    readonly_rootfs: bool = False
    capabilities_add: tuple[str, ...] = ()
    capabilities_drop: tuple[str, ...] = ()
    no_new_privs: bool = False
    masked_paths: tuple[str, ...] | None = None  # None: the runtime's defaults; (): none (procMount Unmasked)
    readonly_paths: tuple[str, ...] | None = None
    seccomp: SecurityProfile = UNCONFINED
    apparmor: SecurityProfile | None = None  # None: the runtime's default


@dataclass(frozen=True)
class PodSandboxConfig:
    metadata: PodMeta
    hostname: str = ""
    log_directory: str = ""
    dns: DNSConfig | None = None
    port_mappings: tuple[PortMapping, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False
    cgroup_parent: str = ""
    resources: LinuxResources | None = None
    share_process_namespace: bool = False  # containers join the sandbox's PID namespace
    sysctls: dict[str, str] = field(default_factory=dict)
    security: LinuxSandboxSecurityContext = LinuxSandboxSecurityContext()


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    readonly: bool = False
    propagation: str = "private"  # private | rslave | rshared


@dataclass(frozen=True)
class ContainerConfig:
    metadata: ContainerMeta
    image: str
    command: tuple[str, ...] = ()  # entrypoint override; empty = image default
    args: tuple[str, ...] = ()  # cmd override; empty = image default (when command empty too)
    working_dir: str = ""
    envs: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    log_path: str = ""  # relative to the sandbox's log_directory
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    resources: LinuxResources | None = None
    stop_signal: str = ""  # "" = image STOPSIGNAL, else SIGTERM
    security: LinuxContainerSecurityContext = LinuxContainerSecurityContext()
    # CRI NamespaceOption pid TARGET: join this container's PID namespace (an ephemeral container's target)
    pid_target_id: str = ""


@dataclass(frozen=True)
class PodSandboxStatus:
    id: str
    metadata: PodMeta
    state: SandboxState
    created_at: float  # epoch seconds
    ip: str = ""
    additional_ips: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    network_namespace: str = ""  # e.g. /proc/<pid>/ns/net of the sandbox, "" if not running


@dataclass(frozen=True)
class ContainerStatus:
    id: str
    sandbox_id: str
    metadata: ContainerMeta
    state: ContainerState
    image: str  # the image as the spec named it
    image_ref: str  # resolved image ID / digest (status.imageID)
    created_at: float = 0.0
    started_at: float = 0.0  # 0 = never started
    finished_at: float = 0.0  # 0 = not finished
    exit_code: int = 0
    reason: str = ""  # "OOMKilled" | "Error" | "Completed" | ""
    message: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    log_path: str = ""
    pid: int = 0
    # What the runtime says the container runs with (CRI ContainerStatus.resources; Docker: its HostConfig);
    # None when the runtime does not say. Never the spec: the status reads it back from here.
    resources: LinuxResources | None = None


class ContainerEventType(enum.Enum):
    CREATED = "CONTAINER_CREATED_EVENT"
    STARTED = "CONTAINER_STARTED_EVENT"
    STOPPED = "CONTAINER_STOPPED_EVENT"
    DELETED = "CONTAINER_DELETED_EVENT"


@dataclass(frozen=True)
class ContainerEvent:
    container_id: str
    type: ContainerEventType
    timestamp: float
    pod_uid: str = ""  # from labels, "" when unknown
    is_sandbox: bool = False


@dataclass(frozen=True)
class ObjectSummary:
    """A cheap listing entry (sandbox or container) for change detection; no inspect needed."""

    id: str
    pod_uid: str
    # the runtime's own short state word, compared for equality; every runtime says "running" only for a running
    # container and a ready sandbox (Docker's paused or restarting ones have other words)
    state: str
    is_sandbox: bool
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False


@dataclass(frozen=True)
class Image:
    id: str
    repo_tags: tuple[str, ...] = ()
    repo_digests: tuple[str, ...] = ()
    size: int = 0
    stop_signal: str = ""
    user: str = ""


@dataclass(frozen=True)
class AuthConfig:
    username: str = ""
    password: str = ""
    auth: str = ""  # base64 "user:password"
    server_address: str = ""
    identity_token: str = ""


@dataclass(frozen=True)
class ContainerStats:
    container_id: str
    timestamp: float
    cpu_usage_core_nanoseconds: int = 0
    memory_working_set_bytes: int = 0
    memory_usage_bytes: int = 0
    # The container's writable layer (CRI WritableLayer), when the runtime reports it.
    writable_layer_used_bytes: int | None = None
    writable_layer_inodes_used: int | None = None
    writable_layer_mountpoint: str = ""  # the filesystem holding it (its FilesystemIdentifier)
    writable_layer_timestamp: float = 0.0
