"""Read-only views over a pod dict (the API's JSON stays the source of truth).

`PodView.of(pod)` is built once per pod version, from a pod that went through the API's
defaulting and validation: the views trust its shapes, but an absent optional field reads as
its upstream default, never as an error. Views only read; unknown fields stay in `raw`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

Pod = dict[str, Any]
Container = dict[str, Any]
ContainerKind = Literal["init", "sidecar", "regular", "ephemeral"]
ProbeHandler = Literal["exec", "httpGet", "tcpSocket", "grpc"]
ResourceMap = Mapping[str, Any]  # resource name -> quantity as written (string or number)

PROBE_HANDLERS: tuple[ProbeHandler, ...] = ("exec", "httpGet", "tcpSocket", "grpc")
_EMPTY: Mapping[str, Any] = {}


def _obj(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, dict) else _EMPTY


def _objs(d: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...]:
    v = d.get(key)
    return tuple(x for x in v if isinstance(x, dict)) if isinstance(v, list) else ()


def _int(d: Mapping[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    return str(v) if v else default


def _strs(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    v = d.get(key)
    return tuple(str(x) for x in v) if isinstance(v, list) else ()


def _str_map(d: Mapping[str, Any], key: str) -> Mapping[str, str]:
    return {str(k): str(v) for k, v in _obj(d, key).items()}


def _port(v: object) -> int | str | None:
    return v if isinstance(v, (int, str)) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class ProbeSpec:
    """A container's probe, with upstream's defaults for the fields left out."""

    handler: ProbeHandler | None  # None: the probe names no handler it knows
    command: tuple[str, ...] = ()  # exec
    port: int | str | None = None  # httpGet, tcpSocket, grpc (a number or a named container port)
    host: str = ""  # httpGet, tcpSocket ("" = the pod IP)
    path: str = ""  # httpGet
    scheme: str = "HTTP"  # httpGet
    http_headers: tuple[tuple[str, str], ...] = ()  # httpGet, in order, repeats kept
    service: str = ""  # grpc
    initial_delay_seconds: int = 0
    timeout_seconds: int = 1
    period_seconds: int = 10
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace_period_seconds: int | None = None  # probe-level override (liveness, startup)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> ProbeSpec:
        handler = next((h for h in PROBE_HANDLERS if isinstance(raw.get(h), dict)), None)
        action = _obj(raw, handler) if handler else _EMPTY
        grace = _int(raw, "terminationGracePeriodSeconds")
        return cls(
            handler=handler,
            command=_strs(action, "command"),
            # grpc's port is a plain number; 0 (absent) is then refused as out of range
            port=_port(action.get("port", 0 if handler == "grpc" else None)),
            host=_str(action, "host"),
            path=_str(action, "path"),
            scheme=_str(action, "scheme", "HTTP"),
            http_headers=tuple(
                (str(h.get("name", "")), str(h.get("value", ""))) for h in _objs(action, "httpHeaders")
            ),
            service=_str(action, "service"),
            # `or`: a zero reads as the default, as the API server's defaulting leaves it
            initial_delay_seconds=_int(raw, "initialDelaySeconds") or 0,
            timeout_seconds=_int(raw, "timeoutSeconds") or 1,
            period_seconds=_int(raw, "periodSeconds") or 10,
            success_threshold=_int(raw, "successThreshold") or 1,
            failure_threshold=_int(raw, "failureThreshold") or 3,
            termination_grace_period_seconds=grace if grace is not None and grace >= 0 else None,
            raw=raw,
        )


@dataclass(frozen=True)
class ContainerPort:
    name: str
    container_port: int
    protocol: str = "TCP"
    host_port: int = 0  # 0: not published on the host
    host_ip: str = ""


@dataclass(frozen=True)
class VolumeMount:
    name: str
    mount_path: str
    read_only: bool = False


@dataclass(frozen=True)
class ContainerView:
    """One container of a pod spec, of a known kind."""

    name: str
    image: str
    kind: ContainerKind
    image_pull_policy: str
    restart_policy: str | None  # container-level: only "Always" (a sidecar) exists upstream
    command: tuple[str, ...]
    args: tuple[str, ...]
    working_dir: str
    env: tuple[Mapping[str, Any], ...]  # raw EnvVar objects (resolved by api.expansion)
    env_from: tuple[Mapping[str, Any], ...]
    ports: tuple[ContainerPort, ...]
    volume_mounts: tuple[VolumeMount, ...]
    startup_probe: ProbeSpec | None
    liveness_probe: ProbeSpec | None
    readiness_probe: ProbeSpec | None
    post_start: Mapping[str, Any] | None  # raw LifecycleHandler objects
    pre_stop: Mapping[str, Any] | None
    stop_signal: str
    has_resources: bool  # `resources` was given (even empty): status echoes it
    requests: ResourceMap | None
    limits: ResourceMap | None
    termination_message_path: str
    termination_message_policy: str
    run_as_user: int | None
    run_as_group: int | None
    privileged: bool
    read_only_root_filesystem: bool
    stdin: bool
    stdin_once: bool
    tty: bool
    raw: Mapping[str, Any] = field(repr=False)
    target_container_name: str = ""  # an ephemeral container's: whose process namespace it joins

    @classmethod
    def of(cls, raw: Mapping[str, Any], kind: ContainerKind = "regular") -> ContainerView:
        lifecycle = _obj(raw, "lifecycle")
        resources = raw.get("resources")
        res = resources if isinstance(resources, dict) else _EMPTY
        sc = _obj(raw, "securityContext")
        restart = raw.get("restartPolicy")

        def probe(key: str) -> ProbeSpec | None:
            p = raw.get(key)
            return ProbeSpec.of(p) if isinstance(p, dict) else None

        def resource_map(key: str) -> ResourceMap | None:
            v = res.get(key)
            return v if isinstance(v, dict) else None

        return cls(
            name=str(raw.get("name")),
            image=_str(raw, "image"),
            kind=kind,
            image_pull_policy=_str(raw, "imagePullPolicy", "IfNotPresent"),
            restart_policy=str(restart) if restart else None,
            command=_strs(raw, "command"),
            args=_strs(raw, "args"),
            working_dir=_str(raw, "workingDir"),
            env=_objs(raw, "env"),
            env_from=_objs(raw, "envFrom"),
            ports=tuple(
                ContainerPort(
                    name=_str(p, "name"),
                    container_port=_int(p, "containerPort") or 0,
                    protocol=_str(p, "protocol", "TCP"),
                    host_port=max(_int(p, "hostPort") or 0, 0),
                    host_ip=_str(p, "hostIP"),
                )
                for p in _objs(raw, "ports")
            ),
            volume_mounts=tuple(
                VolumeMount(str(m.get("name")), str(m.get("mountPath")), bool(m.get("readOnly")))
                for m in _objs(raw, "volumeMounts")
            ),
            startup_probe=probe("startupProbe"),
            liveness_probe=probe("livenessProbe"),
            readiness_probe=probe("readinessProbe"),
            post_start=_obj(lifecycle, "postStart") or None,
            pre_stop=_obj(lifecycle, "preStop") or None,
            stop_signal=_str(lifecycle, "stopSignal"),
            has_resources=isinstance(resources, dict),
            requests=resource_map("requests"),
            limits=resource_map("limits"),
            termination_message_path=_str(raw, "terminationMessagePath", "/dev/termination-log"),
            termination_message_policy=_str(raw, "terminationMessagePolicy", "File"),
            run_as_user=_int(sc, "runAsUser"),
            run_as_group=_int(sc, "runAsGroup"),
            privileged=sc.get("privileged") is True,
            read_only_root_filesystem=sc.get("readOnlyRootFilesystem") is True,
            stdin=raw.get("stdin") is True,
            stdin_once=raw.get("stdinOnce") is True,
            tty=raw.get("tty") is True,
            raw=raw,
            target_container_name=_str(raw, "targetContainerName") if kind == "ephemeral" else "",
        )

    @property
    def is_sidecar(self) -> bool:
        return self.kind == "sidecar"

    @cached_property
    def spec_hash(self) -> str:
        """See `container_hash`; computed on first use, once per view."""
        return container_hash(self.raw)

    def probe(self, kind: str) -> ProbeSpec | None:
        """The probe of this kind ("startup", "liveness", "readiness"), if declared."""
        if kind == "startup":
            return self.startup_probe
        if kind == "liveness":
            return self.liveness_probe
        if kind == "readiness":
            return self.readiness_probe
        raise ValueError(f"unknown probe kind {kind!r}")


@dataclass(frozen=True)
class PodView:
    """A pod version: metadata, the spec fields the agent acts on, and its containers."""

    uid: str
    name: str
    namespace: str
    generation: int | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    deletion_timestamp: str | None
    grace_period: int  # for a pod-level stop: the deletion's grace if one was given, else the spec's
    restart_policy: str
    host_network: bool
    host_pid: bool
    host_ipc: bool
    hostname: str  # spec.hostname as written ("" = the pod name)
    active_deadline_seconds: int | None
    readiness_gates: tuple[str, ...]  # condition types
    priority: int | None
    priority_class_name: str
    run_as_user: int | None  # pod-level securityContext
    run_as_group: int | None
    requests: ResourceMap | None  # pod-level spec.resources
    limits: ResourceMap | None
    overhead: ResourceMap | None
    volumes: tuple[Mapping[str, Any], ...]  # raw Volume objects
    init_containers: tuple[ContainerView, ...]
    app_containers: tuple[ContainerView, ...]
    ephemeral_containers: tuple[ContainerView, ...]  # added through pods/ephemeralcontainers (kubectl debug)
    api_status: Mapping[str, Any]  # the status the pod arrived with (conditions other owners set)
    raw: Pod = field(repr=False)  # the pod dict itself (callers not migrated yet take it); never mutate

    @classmethod
    def of(cls, pod: Pod) -> PodView:
        meta = _obj(pod, "metadata")
        spec = _obj(pod, "spec")
        pod_resources = _obj(spec, "resources")
        inits = tuple(
            ContainerView.of(c, "sidecar" if c.get("restartPolicy") == "Always" else "init")
            for c in _objs(spec, "initContainers")
        )
        gates = tuple(str(g.get("conditionType")) for g in _objs(spec, "readinessGates"))
        psc = _obj(spec, "securityContext")
        deletion = meta.get("deletionTimestamp")

        def resource_map(d: Mapping[str, Any], key: str) -> ResourceMap | None:
            v = d.get(key)
            return v if isinstance(v, dict) else None

        return cls(
            uid=str(meta.get("uid", "")),
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "default")),
            generation=_int(meta, "generation"),
            labels=_str_map(meta, "labels"),
            annotations=_str_map(meta, "annotations"),
            deletion_timestamp=str(deletion) if deletion else None,
            grace_period=_grace_period(meta, spec),
            restart_policy=_str(spec, "restartPolicy", "Always"),
            host_network=spec.get("hostNetwork") is True,
            host_pid=spec.get("hostPID") is True,
            host_ipc=spec.get("hostIPC") is True,
            hostname=_str(spec, "hostname"),
            active_deadline_seconds=_int(spec, "activeDeadlineSeconds"),
            readiness_gates=gates,
            priority=_int(spec, "priority"),
            priority_class_name=_str(spec, "priorityClassName"),
            run_as_user=_int(psc, "runAsUser"),
            run_as_group=_int(psc, "runAsGroup"),
            requests=resource_map(pod_resources, "requests"),
            limits=resource_map(pod_resources, "limits"),
            overhead=resource_map(spec, "overhead"),
            volumes=_objs(spec, "volumes"),
            init_containers=inits,
            app_containers=tuple(ContainerView.of(c, "regular") for c in _objs(spec, "containers")),
            ephemeral_containers=tuple(ContainerView.of(c, "ephemeral") for c in _objs(spec, "ephemeralContainers")),
            api_status=_obj(pod, "status"),
            raw=pod,
        )

    @property
    def full_name(self) -> str:
        """The kubelet's pod full name: name_namespace (unique among a node's pods at one time)."""
        return f"{self.name}_{self.namespace}"

    @property
    def format_pod(self) -> str:
        """As upstream format.Pod: name_namespace(uid), used in messages."""
        return f"{self.name}_{self.namespace}({self.uid})"

    @property
    def should_restart_on_failure(self) -> bool:
        return self.restart_policy != "Never"

    @property
    def is_static(self) -> bool:
        return self.annotations.get("kubernetes.io/config.source") in STATIC_SOURCES

    @property
    def containers(self) -> tuple[ContainerView, ...]:
        """Init containers (sidecars included) then app containers, in spec order."""
        return self.init_containers + self.app_containers

    @property
    def sidecars(self) -> tuple[ContainerView, ...]:
        return tuple(c for c in self.init_containers if c.is_sidecar)

    @property
    def regular_inits(self) -> tuple[ContainerView, ...]:
        return tuple(c for c in self.init_containers if not c.is_sidecar)

    @property
    def probed_containers(self) -> tuple[ContainerView, ...]:
        """Containers that may carry probes: sidecars and app containers, never regular inits."""
        return self.sidecars + self.app_containers

    def find(self, container_name: str) -> ContainerView | None:
        """Any container of the pod by name, ephemeral ones included (upstream GetContainerSpec)."""
        for c in (*self.containers, *self.ephemeral_containers):
            if c.name == container_name:
                return c
        return None

    def container(self, container_name: str) -> ContainerView:
        """The named container; KeyError when the spec has none of that name."""
        c = self.find(container_name)
        if c is None:
            raise KeyError(f"pod {self.format_pod} has no container {container_name!r}")
        return c

    def container_kind(self, container_name: str) -> ContainerKind | None:
        c = self.find(container_name)
        return c.kind if c is not None else None


def _grace_period(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> int:
    g = _int(meta, "deletionGracePeriodSeconds")
    if g is None:
        g = _int(spec, "terminationGracePeriodSeconds")
    return 30 if g is None or g < 0 else g


def container_hash(c: Mapping[str, Any]) -> str:
    """Upstream HashContainer: only the fields a running container may see change (name and image) are
    hashed, so an update of any other field never restarts it."""
    body = json.dumps({"name": c.get("name"), "image": c.get("image")}, sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


# ---- dict accessors for the layers that carry the raw pod JSON before a view exists (sources, the merge,
# admission, the status manager, events): identity and container lookups only. Logic reads a PodView.


STATIC_SOURCES = ("file", "http")  # upstream IsStaticPod: any source but the API server


def is_static(pod: Pod) -> bool:
    """From the static pod directory or a manifest URL."""
    ann = meta(pod).get("annotations")
    return isinstance(ann, dict) and ann.get("kubernetes.io/config.source") in STATIC_SOURCES


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


def ephemeral_containers(pod: Pod) -> list[Container]:
    return _containers(pod, "ephemeralContainers")


def container_kind(pod: Pod, container_name: str) -> ContainerKind | None:
    for c in init_containers(pod):
        if c.get("name") == container_name:
            return "sidecar" if c.get("restartPolicy") == "Always" else "init"
    for c in app_containers(pod):
        if c.get("name") == container_name:
            return "regular"
    for c in ephemeral_containers(pod):
        if c.get("name") == container_name:
            return "ephemeral"
    return None


def find_container(pod: Pod, container_name: str) -> Container | None:
    for c in init_containers(pod) + app_containers(pod) + ephemeral_containers(pod):
        if c.get("name") == container_name:
            return c
    return None



