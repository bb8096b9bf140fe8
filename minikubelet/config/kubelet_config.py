"""KubeletConfiguration (kubelet.config.k8s.io/v1beta1): defaults, file + flag loading, validation.

Precedence is upstream's: built-in defaults, then the config file, then command-line flags.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from minikubelet.api.names import label_value_errors, qualified_name_errors
from minikubelet.api.sysctls import check_allowlist_pattern
from minikubelet.base.bounded_reader import NotRegular, TooLarge, YAMLLoadError, load_yaml, read_regular_file
from minikubelet.base.durations import go_duration
from minikubelet.base.quantity import QuantityError, parse_quantity
from minikubelet.config.tls_names import CIPHER_SUITES, TLS_VERSIONS

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"
# A real configuration is a few KiB; the bound keeps a mistaken path (a device, a huge file) from hurting start-up.
MAX_CONFIG_BYTES = 1 << 20

DEFAULT_EVICTION_HARD: Mapping[str, str] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
}


class ConfigError(ValueError):
    """Invalid configuration; the message names the field (the CLI exits 2 on it)."""


@dataclass(frozen=True)
class KubeletConfig:
    static_pod_path: str = "/etc/kubernetes/manifests"
    file_check_frequency: float = 20.0
    http_check_frequency: float = 20.0
    static_pod_url: str = ""
    static_pod_url_header: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sync_frequency: float = 60.0
    volume_stats_agg_period: float = 60.0  # 0 or negative: no volume disk usage measured
    address: str = "0.0.0.0"  # upstream's default: the authenticated API (10250) must be reachable by the API server
    read_only_port: int = -1  # -1: unset (standalone 10255 on loopback, off when joined: read_only_endpoint); 0: off
    healthz_port: int = 10248
    healthz_bind_address: str = "127.0.0.1"
    container_runtime_endpoint: str = "unix:///var/run/docker.sock"
    cgroup_driver: str = "cgroupfs"
    max_pods: int = 110
    pod_logs_dir: str = "/var/log/pods"
    container_log_max_size: str = "10Mi"
    container_log_max_files: int = 5
    container_log_max_workers: int = 1
    container_log_monitor_interval: float = 10.0
    legacy_container_logs_dir: str = "/var/log/containers"
    root_dir: str = "/var/lib/minikubelet"
    pod_infra_container_image: str = "registry.k8s.io/pause:3.10"
    hostname_override: str = ""
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = ""
    resolv_conf: str = "/etc/resolv.conf"
    node_status_update_frequency: float = 10.0
    cgroups_per_qos: bool = True
    cgroup_root: str = "/"
    enforce_node_allocatable: tuple[str, ...] = ("pods",)
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_EVICTION_HARD))
    pod_pids_limit: int = -1
    cpu_cfs_quota: bool = True
    cpu_cfs_quota_period: float = 0.1
    serialize_image_pulls: bool = True
    single_process_oom_kill: bool = False
    runtime_request_timeout: float = 120.0
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    kubeconfig: str = ""
    bootstrap_kubeconfig: str = ""
    node_ip: str = ""
    pod_network: str = ""  # "" = Docker's default bridge; "host-gw": the node's podCIDR, routes to the others
    non_masquerade_cidr: str = "10.0.0.0/8"
    kube_api_qps: int = 50
    kube_api_burst: int = 100
    node_status_report_frequency: float = 300.0
    node_lease_duration_seconds: int = 40
    rotate_certificates: bool = False
    verbosity: int = 0
    node_labels: Mapping[str, str] = field(default_factory=dict)
    register_with_taints: tuple[Mapping[str, str], ...] = ()
    allowed_unsafe_sysctls: tuple[str, ...] = ()
    seccomp_default: bool = False
    port: int = -1  # -1: unset (10250 when joined to a cluster, off standalone); 0: off
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    authentication: AuthenticationConfig = field(default_factory=lambda: AuthenticationConfig())
    authorization_mode: str = ""  # "": Webhook when joined to a cluster, AlwaysAllow standalone
    tls_min_version: str = ""  # "": Go's server default, TLS 1.2
    tls_cipher_suites: tuple[str, ...] = ()  # Go names; (): OpenSSL's defaults
    server_tls_bootstrap: bool = False
    streaming_connection_idle_timeout: float = 4 * 3600.0
    eviction_soft: Mapping[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: Mapping[str, str] = field(default_factory=dict)
    eviction_minimum_reclaim: Mapping[str, str] = field(default_factory=dict)
    eviction_max_pod_grace_period: int = 0
    eviction_pressure_transition_period: float = 300.0
    kernel_memcg_notification: bool = False
    image_gc_high_threshold_percent: int = 85
    image_gc_low_threshold_percent: int = 80
    image_minimum_gc_age: float = 120.0
    image_maximum_gc_age: float = 0.0  # 0: no maximum
    shutdown_grace_period: float = 0.0
    shutdown_grace_period_critical_pods: float = 0.0
    shutdown_grace_period_by_pod_priority: tuple[ShutdownGracePeriodByPodPriority, ...] = ()
    lock_file_path: str = ""  # upstream KubeletFlags.LockFilePath
    exit_on_lock_contention: bool = False  # upstream KubeletFlags.ExitOnLockContention


STANDALONE_READ_ONLY_PORT = 10255


def read_only_endpoint(cfg: KubeletConfig) -> tuple[str, int] | None:
    """Where the unauthenticated read-only port listens, if anywhere. Set, it is upstream's: on `address`. Unset,
    upstream's config-file default is off; a standalone node (nothing else to ask for its pods) keeps 10255 for
    `curl localhost:10255/pods`, but on loopback only, whatever `address` says."""
    if cfg.read_only_port >= 0:
        return (cfg.address, cfg.read_only_port) if cfg.read_only_port else None
    if cfg.kubeconfig or cfg.bootstrap_kubeconfig:
        return None
    return "127.0.0.1", STANDALONE_READ_ONLY_PORT


@dataclass(frozen=True)
class ShutdownGracePeriodByPodPriority:
    """One `shutdownGracePeriodByPodPriority` entry: pods of at least `priority` get `grace_seconds`."""

    priority: int
    grace_seconds: int


@dataclass(frozen=True)
class AuthenticationConfig:
    """KubeletConfiguration `authentication` (upstream v1beta1 defaults: anonymous off, webhook on)."""

    client_ca_file: str = ""
    webhook_enabled: bool = True
    anonymous_enabled: bool = False
    webhook_cache_ttl: float = 120.0  # webhook.cacheTTL


# ---------------------------------------------------------------- value parsers
# Each parser takes the raw value and returns the typed value or raises ValueError with a
# message that does not yet name the field (the caller prefixes it).

_GO_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# Go durations are int64 nanoseconds (about 292 years).
_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
_INT32_MAX = 2**31 - 1


def parse_duration(text: str) -> float:
    """Parse a Go duration string (time.ParseDuration syntax) into seconds."""
    s = text
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _GO_DURATION_PART.match(s, pos)
        if not m or m.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if total > _MAX_DURATION_SECONDS:
        raise ValueError(f"invalid duration {text!r}: out of range")
    return sign * total


def _duration(value: object) -> float:
    if not isinstance(value, str):
        raise ValueError(f"must be a duration string such as \"20s\" or \"1m30s\", got {value!r}")
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(f"must be a duration string such as \"20s\" or \"1m30s\", got {value!r}") from None


def _positive_duration(value: object) -> float:
    seconds = _duration(value)
    if seconds <= 0:
        raise ValueError(f"must be greater than 0, got {value!r}")
    return seconds


def _int_between(lo: int, hi: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"must be an integer between {lo} and {hi}, got {value!r}")
        return value

    return parse


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {value!r}")
    return value


def _absolute_path(value: object) -> str:
    path = _string(value)
    if not path.startswith("/") or "\x00" in path:
        raise ValueError(f"must be an absolute path, got {value!r}")
    return path


def _optional_absolute_path(value: object) -> str:
    return "" if value == "" else _absolute_path(value)


def _ip(value: object) -> str:
    text = _string(value)
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"must be an IP address, got {value!r}") from None
    return text


def _optional_ip(value: object) -> str:
    return "" if value == "" else _ip(value)


def _cidr(value: object) -> str:
    try:
        return str(ipaddress.ip_network(_string(value), strict=False))
    except ValueError:
        raise ValueError(f"must be a CIDR like 10.0.0.0/8, got {value!r}") from None


def _static_pod_url(value: object) -> str:
    url = _string(value)
    if url and not re.match(r"^https?://[^\s/]+", url):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return url


_HTTP_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def _url_headers(value: object) -> dict[str, tuple[str, ...]]:
    # Upstream's map[string][]string (http.Header); Go's client refuses such names and values per request.
    if not isinstance(value, dict):
        raise ValueError(f"must be a map of header name to a list of values, got {value!r}")
    out: dict[str, tuple[str, ...]] = {}
    for name, values in value.items():
        if not isinstance(name, str) or not _HTTP_TOKEN.match(name):
            raise ValueError(f"{name!r} is not a valid HTTP header name")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{name}: must be a list of strings, got {values!r}")
        if any(c in v for v in values for c in "\r\n\x00"):
            raise ValueError(f"{name}: a value must not hold CR, LF or NUL")
        out[name] = tuple(values)
    return out


def _runtime_endpoint(value: object) -> str:
    endpoint = _string(value)
    if endpoint.startswith("/"):
        # Upstream still accepts a bare socket path (deprecated) and means unix://.
        endpoint = "unix://" + endpoint
    if endpoint.startswith(("tcp://", "npipe://")):
        scheme = endpoint.split("://", 1)[0]
        raise ValueError(f"{scheme}:// endpoints are not supported on Linux, use unix:///path/to.sock, got {value!r}")
    if not endpoint.startswith("unix:///") or len(endpoint) <= len("unix:///"):
        raise ValueError(f"must be a unix:// endpoint with an absolute socket path, got {value!r}")
    return endpoint


def _one_of(*allowed: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if value not in allowed:
            choices = ", ".join(f'"{a}"' for a in allowed)
            raise ValueError(f"supported values: {choices}, got {value!r}")
        return str(value)

    return parse


_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _hostname(value: object) -> str:
    # Like upstream nodeutil.GetHostname: trimmed and lower-cased.
    name = _string(value).strip().lower()
    if name and (len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name)):
        raise ValueError(f"must be a valid DNS-1123 subdomain (the node name), got {value!r}")
    return name


def _ip_list(value: object) -> tuple[str, ...]:
    # a list in the file; comma-separated on the command line, as the kubelet's StringSlice flag
    items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise ValueError(f"must be a list of IP addresses, got {value!r}")
    try:
        return tuple(str(ipaddress.ip_address(v)) for v in items)
    except ValueError:
        raise ValueError(f"must be a list of IP addresses, got {value!r}") from None


def _cluster_domain(value: object) -> str:
    domain = _string(value)
    if domain and (len(domain) > 253 or not _DNS1123_SUBDOMAIN.match(domain)):
        raise ValueError(f"must be a valid DNS-1123 subdomain such as \"cluster.local\", got {value!r}")
    return domain


_ALLOCATABLE_TARGETS = (
    "pods",
    "system-reserved",
    "kube-reserved",
    "system-reserved-compressible",
    "kube-reserved-compressible",
    "none",
)


def _enforce_node_allocatable(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of strings, got {value!r}")
    for item in value:
        if item not in _ALLOCATABLE_TARGETS:
            choices = ", ".join(f'"{a}"' for a in _ALLOCATABLE_TARGETS)
            raise ValueError(f"supported values: {choices}, got {item!r}")
    if "none" in value and len(value) > 1:
        raise ValueError("\"none\" cannot be combined with other values")
    return tuple(value)


_RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")


def _reserved(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"must be a map of resource name to quantity, got {value!r}")
    out: dict[str, str] = {}
    for key, qty in value.items():
        if key not in _RESERVABLE and not str(key).startswith("hugepages-"):
            raise ValueError(f"unsupported resource {key!r}")
        try:
            if not isinstance(qty, str | int) or isinstance(qty, bool) or parse_quantity(qty) < 0:
                raise QuantityError(str(qty))
        except QuantityError:
            raise ValueError(f"{key}: must be a non-negative quantity, got {qty!r}") from None
        out[str(key)] = str(qty)
    return out


_EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "allocatableMemory.available",
    "pid.available",
)


def _eviction(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"must be a map of signal to threshold, got {value!r}")
    out: dict[str, str] = {}
    for signal, threshold in value.items():
        if signal not in _EVICTION_SIGNALS:
            raise ValueError(f"unsupported eviction signal {signal!r}")
        if not isinstance(threshold, str):
            raise ValueError(f"{signal}: threshold must be a string such as \"100Mi\" or \"10%\", got {threshold!r}")
        if threshold.endswith("%"):
            try:
                pct = float(threshold[:-1])
            except ValueError:
                pct = -1.0
            if not 0 <= pct <= 100:
                raise ValueError(f"{signal}: percentage must be between 0% and 100%, got {threshold!r}")
        else:
            try:
                if parse_quantity(threshold) < 0:
                    raise QuantityError(threshold)
            except QuantityError:
                raise ValueError(f"{signal}: must be a non-negative quantity or a percentage, got {threshold!r}") from None
        out[signal] = threshold
    return out


def _eviction_grace_periods(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"must be a map of signal to duration, got {value!r}")
    out: dict[str, str] = {}
    for signal, period in value.items():
        if signal not in _EVICTION_SIGNALS:
            raise ValueError(f"unsupported eviction signal {signal!r}")
        if not isinstance(period, str):
            raise ValueError(f"{signal}: must be a duration string such as \"1m30s\", got {period!r}")
        try:
            seconds = parse_duration(period)
        except ValueError:
            raise ValueError(f"{signal}: must be a duration string such as \"1m30s\", got {period!r}") from None
        if seconds < 0:
            raise ValueError(f"{signal}: invalid eviction grace period {period!r}, must be a positive value")
        out[signal] = period
    return out


def _eviction_minimum_reclaim(value: object) -> dict[str, str]:
    out = _eviction(value)
    for signal, amount in out.items():
        if amount.endswith("%") and float(amount[:-1]) <= 0:
            raise ValueError(f"{signal}: eviction percentage minimum reclaim must be positive, got {amount!r}")
    return out


def _log_monitor_interval(value: object) -> float:
    seconds = _duration(value)
    if seconds < 3:
        raise ValueError(f"must be a positive time duration greater than or equal to 3s, got {value!r}")
    return seconds


def _non_negative_duration(value: object) -> float:
    seconds = _duration(value)
    if seconds < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return seconds


def _feature_gates(value: object) -> dict[str, bool]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, bool) for k, v in value.items()):
        raise ValueError(f"must be a map of feature name to true/false, got {value!r}")
    return dict(value)


def _log_max_size(value: object) -> str:
    try:
        if not isinstance(value, str) or parse_quantity(value) <= 0:
            raise QuantityError(str(value))
    except QuantityError:
        raise ValueError(f"must be a positive quantity such as \"10Mi\", got {value!r}") from None
    return value


# Labels a kubelet may set in the kubernetes.io / k8s.io namespaces (k8s.io/kubelet/pkg/apis).
_KUBELET_LABELS = (
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone", "kubernetes.io/arch",
    "kubernetes.io/hostname", "kubernetes.io/os", "node.kubernetes.io/instance-type", "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
)
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _label_namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _is_kubernetes_label(key: str) -> bool:
    ns = _label_namespace(key)
    return ns in ("kubernetes.io", "k8s.io") or ns.endswith((".kubernetes.io", ".k8s.io"))


def _is_kubelet_label(key: str) -> bool:
    ns = _label_namespace(key)
    return key in _KUBELET_LABELS or any(ns == a or ns.endswith("." + a) for a in _KUBELET_LABEL_NAMESPACES)


def _node_labels(value: object) -> dict[str, str]:
    """--node-labels: "k=v,k2=v2" (cliflag.ConfigurationMap), checked as upstream ValidateKubeletFlags."""
    labels: dict[str, str] = {}
    if isinstance(value, str):
        for item in value.split(","):
            item = item.strip()
            if item:
                k, _, v = item.partition("=")
                labels[k.strip()] = v.strip()
    elif isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        labels = dict(value)
    else:
        raise ValueError(f"must be key=value pairs separated by ',', got {value!r}")
    unknown = sorted(k for k in labels if _is_kubernetes_label(k) and not _is_kubelet_label(k))
    if unknown:
        raise ValueError(
            f"unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{' '.join(unknown)}]; "
            f"--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix "
            f"({', '.join(_KUBELET_LABEL_NAMESPACES)}) or be in the specifically allowed set ({', '.join(_KUBELET_LABELS)})")
    invalid = [f"'{k}' - {'; '.join(errs)}" for k, errs in
               [(k, qualified_name_errors(k)) for k in labels] + [(v, label_value_errors(v)) for v in labels.values()]
               if errs]
    if invalid:
        raise ValueError(f"invalid node labels: {'; '.join(invalid)}")
    return labels


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _check_taint(key: str, value: str, effect: str) -> None:
    """Upstream taints.CheckTaintValidation."""
    if errs := qualified_name_errors(key):
        raise ValueError(f"invalid taint key: {'; '.join(errs)}")
    if value and (errs := label_value_errors(value)):
        raise ValueError(f"invalid taint value: {'; '.join(errs)}")
    if effect and effect not in _TAINT_EFFECTS:
        raise ValueError(f"invalid taint effect: {effect}, unsupported taint effect")


def _parse_taint_spec(spec: str) -> dict[str, str]:
    """One "<key>=<value>:<effect>" of --register-with-taints (upstream taints.ParseTaints)."""
    parts = spec.split(":")
    if len(parts) != 2:
        raise ValueError(f"invalid taint spec: {spec}")
    kv = parts[0].split("=")
    if len(kv) > 2:
        raise ValueError(f"invalid taint spec: {spec}")
    key, value, effect = kv[0], kv[1] if len(kv) == 2 else "", parts[1]
    _check_taint(key, value, effect)
    if not effect:
        raise ValueError(f"invalid taint spec: {spec}")
    return {"key": key, "value": value, "effect": effect}


def _taints(value: object) -> tuple[dict[str, str], ...]:
    """registerWithTaints: a list of Taint objects in a file, "k=v:Effect,..." on the command line."""
    taints: list[dict[str, str]] = []
    if isinstance(value, str):
        seen: set[tuple[str, str]] = set()
        for spec in value.split(",") if value else []:
            t = _parse_taint_spec(spec)
            if (t["key"], t["effect"]) in seen:
                raise ValueError(f"duplicated taints with the same key and effect: {spec}")
            seen.add((t["key"], t["effect"]))
            taints.append(t)
    elif isinstance(value, list):
        for t in value:
            if not isinstance(t, dict) or not all(isinstance(t.get(k, ""), str) for k in ("key", "value", "effect")):
                raise ValueError(f"each taint must be an object with string key, value and effect, got {t!r}")
            if t.get("timeAdded") is not None:
                raise ValueError("invalid configuration: taint.TimeAdded is not nil")
            _check_taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""))
            taints.append({"key": t.get("key", ""), "value": t.get("value", ""), "effect": t.get("effect", "")})
    else:
        raise ValueError(f"must be a list of taints, got {value!r}")
    return tuple(taints)
def _sysctl_patterns(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of sysctl names or patterns ending in *, got {value!r}")
    for pattern in value:
        check_allowlist_pattern(pattern)
    return tuple(value)


def _cfs_period(value: object) -> float:
    seconds = _duration(value)
    if not 0.001 <= seconds <= 1.0:
        raise ValueError(f"must be between 1ms and 1s, inclusive, got {value!r}")
    return seconds


# ---------------------------------------------------------------- the field table


@dataclass(frozen=True)
class _Field:
    attr: str
    yaml_name: str | None  # None: flag only
    flag: str | None  # None: file only
    parse: Callable[[object], object]
    flag_help: str = ""
    flag_type: type = str  # what argparse reads; parse() then validates it like a file value


def _authentication(value: object) -> AuthenticationConfig:
    if not isinstance(value, dict):
        raise ValueError(f"must be an object, got {value!r}")
    x509 = value.get("x509") or {}
    webhook = value.get("webhook") or {}
    anonymous = value.get("anonymous") or {}
    if not all(isinstance(v, dict) for v in (x509, webhook, anonymous)):
        raise ValueError("x509, webhook and anonymous must be objects")
    return AuthenticationConfig(
        client_ca_file=str(_optional_absolute_path(x509.get("clientCAFile", ""))),
        webhook_enabled=_bool(webhook.get("enabled", True)),
        anonymous_enabled=_bool(anonymous.get("enabled", False)),
        webhook_cache_ttl=_duration(webhook.get("cacheTTL", "2m")),
    )


def _tls_min_version(value: object) -> str:
    name = _string(value)
    if name and name not in TLS_VERSIONS:
        raise ValueError(f"unknown tls version {name!r}; one of {', '.join(sorted(TLS_VERSIONS))}")
    return name


def _tls_cipher_suites(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of cipher suite names, got {value!r}")
    for name in value:
        if name not in CIPHER_SUITES:
            raise ValueError(f"Cipher suite {name} not supported or doesn't exist")
    return tuple(value)


def _authorization(value: object) -> str:
    if not isinstance(value, dict):
        raise ValueError(f"must be an object, got {value!r}")
    return str(_one_of("AlwaysAllow", "Webhook")(value.get("mode", "Webhook")))


def _shutdown_grace_by_priority(value: object) -> tuple[ShutdownGracePeriodByPodPriority, ...]:
    if not isinstance(value, list):
        raise ValueError(f"must be a list of {{priority, shutdownGracePeriodSeconds}}, got {value!r}")
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise ValueError(f"must be a list of {{priority, shutdownGracePeriodSeconds}}, got {item!r}")
        priority, seconds = item.get("priority", 0), item.get("shutdownGracePeriodSeconds", 0)
        if isinstance(priority, bool) or not isinstance(priority, int) or not -2**31 <= priority <= _INT32_MAX:
            raise ValueError(f"priority must be a 32-bit integer, got {priority!r}")
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not -2**63 <= seconds < 2**63:
            raise ValueError(f"shutdownGracePeriodSeconds must be an integer, got {seconds!r}")
        out.append(ShutdownGracePeriodByPodPriority(priority, seconds))
    return tuple(out)


_FIELDS = (
    _Field("static_pod_path", "staticPodPath", "--pod-manifest-path", _optional_absolute_path, "Directory of static pod manifests (staticPodPath)."),
    _Field("file_check_frequency", "fileCheckFrequency", "--file-check-frequency", _positive_duration, "Re-list period of the static pod directory (e.g. 20s)."),
    _Field("http_check_frequency", "httpCheckFrequency", None, _positive_duration),
    _Field("static_pod_url", "staticPodURL", None, _static_pod_url),
    _Field("static_pod_url_header", "staticPodURLHeader", None, _url_headers),
    _Field("sync_frequency", "syncFrequency", "--sync-frequency", _positive_duration, "Pod resync period (e.g. 1m)."),
    _Field("volume_stats_agg_period", "volumeStatsAggPeriod", "--volume-stats-agg-period", _duration,
           "How often each pod's volume disk usage is measured and cached (e.g. 1m); 0 or negative: never."),
    _Field("address", "address", "--address", _ip, "IP address the kubelet API (and a readOnlyPort that is set) binds to (default 0.0.0.0)."),
    _Field("read_only_port", "readOnlyPort", "--read-only-port", _int_between(0, 65535), "Port of the unauthenticated read-only HTTP server, on --address (0 disables it; unset: 10255 on 127.0.0.1 standalone, off when joined to a cluster).", int),
    _Field("healthz_port", "healthzPort", "--healthz-port", _int_between(0, 65535), "Port of the healthz endpoint (0 disables it).", int),
    _Field("healthz_bind_address", "healthzBindAddress", None, _ip),
    _Field("container_runtime_endpoint", "containerRuntimeEndpoint", "--container-runtime-endpoint", _runtime_endpoint, "Runtime socket, e.g. unix:///var/run/docker.sock."),
    _Field("cgroup_driver", "cgroupDriver", "--cgroup-driver", _one_of("cgroupfs", "systemd"), "cgroupfs or systemd."),
    _Field("max_pods", "maxPods", "--max-pods", _int_between(1, _INT32_MAX), "Maximum number of pods on this node.", int),
    _Field("pod_logs_dir", "podLogsDir", None, _absolute_path),
    _Field("container_log_max_size", "containerLogMaxSize", None, _log_max_size),
    _Field("container_log_max_files", "containerLogMaxFiles", None, _int_between(2, _INT32_MAX)),
    _Field("container_log_max_workers", "containerLogMaxWorkers", None, _int_between(1, _INT32_MAX)),
    _Field("container_log_monitor_interval", "containerLogMonitorInterval", None, _log_monitor_interval),
    # not upstream's (a constant there): lets tests and lab hosts keep the links out of /var/log
    _Field("legacy_container_logs_dir", "legacyContainerLogsDir", None, _absolute_path),
    _Field("root_dir", "rootDir", "--root-dir", _absolute_path, "Directory for the agent's state (volumes, checkpoints)."),
    _Field("pod_infra_container_image", "podInfraContainerImage", "--pod-infra-container-image", _string, "Image of the pod sandbox (pause) container."),
    _Field("hostname_override", "hostnameOverride", "--hostname-override", _hostname, "Use this name as the node name instead of the hostname."),
    _Field("cluster_dns", "clusterDNS", "--cluster-dns", _ip_list, "Comma-separated DNS server IPs for pods with dnsPolicy ClusterFirst."),
    _Field("cluster_domain", "clusterDomain", "--cluster-domain", _cluster_domain, "Cluster domain: pods search <ns>.svc.<domain>, svc.<domain>, <domain>."),
    _Field("resolv_conf", "resolvConf", "--resolv-conf", _optional_absolute_path, "Resolver config the pods' DNS is based on (\"\" disables)."),
    _Field("node_status_update_frequency", "nodeStatusUpdateFrequency", None, _positive_duration),
    _Field("cgroups_per_qos", "cgroupsPerQOS", None, _bool),
    _Field("cgroup_root", "cgroupRoot", None, _absolute_path),
    _Field("enforce_node_allocatable", "enforceNodeAllocatable", None, _enforce_node_allocatable),
    _Field("kube_reserved", "kubeReserved", None, _reserved),
    _Field("system_reserved", "systemReserved", None, _reserved),
    _Field("eviction_hard", "evictionHard", None, _eviction),
    _Field("pod_pids_limit", "podPidsLimit", None, _int_between(-1, 2**63 - 1)),
    _Field("cpu_cfs_quota", "cpuCFSQuota", None, _bool),
    _Field("cpu_cfs_quota_period", "cpuCFSQuotaPeriod", None, _cfs_period),
    _Field("serialize_image_pulls", "serializeImagePulls", None, _bool),
    _Field("single_process_oom_kill", "singleProcessOOMKill", None, _bool),
    _Field("runtime_request_timeout", "runtimeRequestTimeout", None, _positive_duration),
    _Field("feature_gates", "featureGates", None, _feature_gates),
    _Field("kubeconfig", None, "--kubeconfig", _optional_absolute_path, "Kubeconfig for the API server; without it the agent runs standalone."),
    _Field("bootstrap_kubeconfig", None, "--bootstrap-kubeconfig", _optional_absolute_path,
           "Kubeconfig with a bootstrap token: request a client certificate, write --kubeconfig (default <root-dir>/kubelet.conf)."),
    _Field("node_ip", None, "--node-ip", _optional_ip, "IP address of the node (InternalIP); default: the default route's interface."),
    _Field("pod_network", None, "--pod-network", _one_of("", "host-gw"),
           "Pod networking of a joined node: \"host-gw\" (a bridge on the Node's spec.podCIDRs, routes to other Nodes' podCIDRs via their InternalIPs) or \"\" (Docker's default bridge)."),
    _Field("non_masquerade_cidr", None, "--non-masquerade-cidr", _cidr,
           "With --pod-network=host-gw: pod traffic to addresses outside this range is masqueraded (the cluster CIDR)."),
    _Field("kube_api_qps", "kubeAPIQPS", "--kube-api-qps", _int_between(0, _INT32_MAX), "Requests per second to the API server (0: unlimited).", int),
    _Field("kube_api_burst", "kubeAPIBurst", "--kube-api-burst", _int_between(0, _INT32_MAX), "Burst of requests to the API server.", int),
    _Field("node_status_report_frequency", "nodeStatusReportFrequency", None, _positive_duration),
    _Field("node_lease_duration_seconds", "nodeLeaseDurationSeconds", None, _int_between(1, _INT32_MAX)),
    _Field("rotate_certificates", "rotateCertificates", None, _bool),
    _Field("verbosity", None, "--v", _int_between(0, 10), "Log verbosity (0-10).", int),
    _Field("node_labels", None, "--node-labels", _node_labels, "Labels of the node, key=value pairs separated by ','."),
    _Field("register_with_taints", "registerWithTaints", "--register-with-taints", _taints,
           "Taints of the node, \"<key>=<value>:<effect>\" separated by ','."),
    _Field("allowed_unsafe_sysctls", "allowedUnsafeSysctls", None, _sysctl_patterns),
    _Field("seccomp_default", "seccompDefault", None, _bool),
    _Field("port", "port", "--port", _int_between(0, 65535), "Port of the authenticated kubelet API (HTTPS; 0 disables it; default 10250 when joined to a cluster, off standalone).", int),
    _Field("tls_cert_file", "tlsCertFile", "--tls-cert-file", _optional_absolute_path, "Serving certificate of the kubelet API (default: self-signed under <root-dir>/pki)."),
    _Field("tls_private_key_file", "tlsPrivateKeyFile", "--tls-private-key-file", _optional_absolute_path, "Key of --tls-cert-file."),
    _Field("authentication", "authentication", None, _authentication),
    _Field("authorization_mode", "authorization", None, _authorization),
    _Field("tls_min_version", "tlsMinVersion", "--tls-min-version", _tls_min_version,
           "Minimum TLS version of the kubelet API: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13."),
    _Field("tls_cipher_suites", "tlsCipherSuites", "--tls-cipher-suites", _tls_cipher_suites,
           "Comma-separated cipher suites (Go names) of the kubelet API for TLS 1.2 and below."),
    _Field("server_tls_bootstrap", "serverTLSBootstrap", None, _bool),
    _Field("streaming_connection_idle_timeout", "streamingConnectionIdleTimeout", "--streaming-connection-idle-timeout",
           _positive_duration, "Idle time after which exec/attach/port-forward connections are closed (e.g. 4h)."),
    _Field("eviction_soft", "evictionSoft", None, _eviction),
    _Field("eviction_soft_grace_period", "evictionSoftGracePeriod", None, _eviction_grace_periods),
    _Field("eviction_minimum_reclaim", "evictionMinimumReclaim", None, _eviction_minimum_reclaim),
    _Field("eviction_max_pod_grace_period", "evictionMaxPodGracePeriod", None, _int_between(-(2**31), _INT32_MAX)),
    _Field("eviction_pressure_transition_period", "evictionPressureTransitionPeriod", None, _non_negative_duration),
    _Field("kernel_memcg_notification", "kernelMemcgNotification", None, _bool),
    _Field("image_gc_high_threshold_percent", "imageGCHighThresholdPercent", None, _int_between(0, 100)),
    _Field("image_gc_low_threshold_percent", "imageGCLowThresholdPercent", None, _int_between(0, 100)),
    _Field("image_minimum_gc_age", "imageMinimumGCAge", None, _non_negative_duration),
    _Field("image_maximum_gc_age", "imageMaximumGCAge", None, _non_negative_duration),
    _Field("shutdown_grace_period", "shutdownGracePeriod", None, _duration),
    _Field("shutdown_grace_period_critical_pods", "shutdownGracePeriodCriticalPods", None, _duration),
    _Field("shutdown_grace_period_by_pod_priority", "shutdownGracePeriodByPodPriority", None,
           _shutdown_grace_by_priority),
    _Field("lock_file_path", None, "--lock-file", _string,
           "File to hold an exclusive lock on while running; start-up waits while another process holds it."),
    _Field("exit_on_lock_contention", None, "--exit-on-lock-contention", _bool,
           "Exit (pods keep running) as soon as another process opens the --lock-file.", bool),
)
_BY_YAML = {f.yaml_name: f for f in _FIELDS if f.yaml_name}
_BY_ATTR = {f.attr: f for f in _FIELDS}
assert set(_BY_ATTR) == {f.name for f in fields(KubeletConfig)}

# Upstream v1beta1 fields the agent accepts in a file but does not act on: warned, not rejected.
_UPSTREAM_UNSUPPORTED = frozenset(
    """enableServer podLogsDir port volumePluginDir providerID tlsCertFile
    tlsPrivateKeyFile tlsCipherSuites tlsMinVersion rotateCertificates serverTLSBootstrap authentication
    authorization registryPullQPS registryBurst imagePullCredentialsVerificationPolicy
    preloadedImagesVerificationAllowlist eventRecordQPS eventBurst enableDebuggingHandlers
    enableContentionProfiling oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout
    nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge
    imageGCHighThresholdPercent imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups
    systemCgroups cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions cpuManagerReconcilePeriod
    memoryManagerPolicy topologyManagerPolicy topologyManagerScope topologyManagerPolicyOptions qosReserved
    hairpinMode podCIDR resolvConf runOnce nodeStatusMaxImages maxOpenFiles contentType kubeAPIQPS
    kubeAPIBurst maxParallelImagePulls evictionSoft evictionSoftGracePeriod evictionPressureTransitionPeriod
    evictionMaxPodGracePeriod evictionMinimumReclaim mergeDefaultEvictionSettings podsPerCore
    enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains iptablesMasqueradeBit
    iptablesDropBit failSwapOn memorySwap containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers
    containerLogMonitorInterval configMapAndSecretChangeDetectionStrategy reservedSystemCPUs
    showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup allowedUnsafeSysctls
    kernelMemcgNotification enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod
    shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory
    enableProfilingHandler enableDebugFlagsHandler seccompDefault memoryThrottlingFactor registerWithTaints
    registerNode tracing localStorageCapacityIsolation imageServiceEndpoint failCgroupV1 userNamespaces""".split()
) - set(_BY_YAML)


def _parse_field(f: _Field, value: object, label: str) -> object:
    try:
        return f.parse(value)
    except ValueError as exc:
        raise ConfigError(f"{label}: {exc}") from None


def parse_config_document(data: bytes, source: str) -> tuple[dict[str, object], list[str]]:
    """Parse a KubeletConfiguration file's bytes into {attr: typed value} plus warnings."""
    try:
        docs = load_yaml(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not valid UTF-8") from None
    except YAMLLoadError as exc:
        raise ConfigError(f"{source}: not valid YAML/JSON: {exc}") from None
    # Upstream decodes the first document of the stream and ignores the rest.
    doc = docs[0] if docs else None
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: must hold a {KIND} object, got {type(doc).__name__}")
    if doc.get("apiVersion") != API_VERSION:
        raise ConfigError(f"apiVersion: must be {API_VERSION!r}, got {doc.get('apiVersion')!r} in {source}")
    if doc.get("kind") != KIND:
        raise ConfigError(f"kind: must be {KIND!r}, got {doc.get('kind')!r} in {source}")
    values: dict[str, object] = {}
    warnings: list[str] = []
    for key, raw in doc.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "logging":
            if isinstance(raw, dict) and "verbosity" in raw:
                values["verbosity"] = _parse_field(_BY_ATTR["verbosity"], raw["verbosity"], "logging.verbosity")
            continue
        f = _BY_YAML.get(key) if isinstance(key, str) else None
        if f is None:
            if key in _UPSTREAM_UNSUPPORTED:
                warnings.append(f"field {key!r} in {source} is not supported by minikubelet and is ignored")
            else:
                warnings.append(f"unknown field {key!r} in {source}")
            continue
        values[f.attr] = _parse_field(f, raw, key)
    return values, warnings


def load_config(path: str | None, flags: Mapping[str, object]) -> tuple[KubeletConfig, list[str]]:
    """Defaults <- config file (if any) <- flags. `flags` maps KubeletConfig attribute names to values.

    Raises ConfigError naming the field (or the flag) on wrong types or values.
    """
    values: dict[str, object] = {}
    warnings: list[str] = []
    if path:
        try:
            data, _ = read_regular_file(path, MAX_CONFIG_BYTES)
        except (NotRegular, TooLarge) as exc:
            raise ConfigError(f"--config: {path} {exc}") from None
        except OSError as exc:
            raise ConfigError(f"--config: could not read {path}: {exc.strerror or exc}") from None
        values, warnings = parse_config_document(data, path)
    for attr, raw in flags.items():
        f = _BY_ATTR.get(attr)
        if f is None:
            raise ConfigError(f"unknown setting {attr!r}")
        if raw is None:
            continue
        label = f.flag or f.yaml_name or attr
        values[attr] = _parse_field(f, raw, label)
    config = replace(KubeletConfig(), **values)  # type: ignore[arg-type]
    _check_gc_and_eviction(config)
    _validate_shutdown(config)
    if config.exit_on_lock_contention and not config.lock_file_path:
        raise ConfigError("cannot exit on lock file contention: no lock file specified")  # upstream's run()
    return config, warnings


def _check_gc_and_eviction(config: KubeletConfig) -> None:
    """Upstream's cross-field checks (kubelet config validation, eviction ParseThresholdConfig)."""
    if config.image_gc_low_threshold_percent >= config.image_gc_high_threshold_percent:
        raise ConfigError(f"imageGCLowThresholdPercent ({config.image_gc_low_threshold_percent}) must be less than "
                          f"imageGCHighThresholdPercent ({config.image_gc_high_threshold_percent})")
    if config.image_maximum_gc_age and config.image_maximum_gc_age <= config.image_minimum_gc_age:
        raise ConfigError("imageMaximumGCAge must be greater than imageMinimumGCAge")
    for name, thresholds in (("evictionHard", config.eviction_hard), ("evictionSoft", config.eviction_soft)):
        for signal, value in thresholds.items():
            if not value.endswith("%") and parse_quantity(value) == 0:
                raise ConfigError(f"{name}: eviction threshold {signal} must be positive: {value}")
    for signal in config.eviction_soft:
        if signal not in config.eviction_soft_grace_period:
            raise ConfigError(f"evictionSoft: grace period must be specified for the soft eviction threshold {signal}")


def feature_enabled(config: KubeletConfig, gate: str) -> bool:
    """A gate the agent honours, at its 1.36 default unless `featureGates` sets it."""
    return config.feature_gates.get(gate, _GATE_DEFAULTS[gate])


def _validate_shutdown(config: KubeletConfig) -> None:
    """Upstream's cross-field checks of the graceful node shutdown settings (apis/config/validation)."""
    errors = []
    period, critical = config.shutdown_grace_period, config.shutdown_grace_period_critical_pods
    if feature_enabled(config, "GracefulNodeShutdown"):
        if critical > period:
            errors.append(f"invalid configuration: shutdownGracePeriodCriticalPods {go_duration(critical)} must be "
                          f"<= shutdownGracePeriod {go_duration(period)}")
        if period < 0 or 0 < period < 1:
            errors.append(f"invalid configuration: shutdownGracePeriod {go_duration(period)} must be either zero "
                          "or otherwise >= 1 sec")
        if critical < 0 or 0 < critical < 1:
            errors.append(f"invalid configuration: shutdownGracePeriodCriticalPods {go_duration(critical)} must be "
                          "either zero or otherwise >= 1 sec")
    elif period > 0 or critical > 0:
        errors.append("invalid configuration: specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods "
                      "requires feature gate GracefulNodeShutdown")
    by_priority = config.shutdown_grace_period_by_pod_priority
    if feature_enabled(config, "GracefulNodeShutdownBasedOnPodPriority"):
        if by_priority and (period > 0 or critical > 0):
            errors.append("invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and "
                          "shutdownGracePeriod at the same time")
    elif by_priority:
        errors.append("invalid configuration: Specifying shutdownGracePeriodByPodPriority requires feature gate "
                      "GracefulNodeShutdownBasedOnPodPriority")
    if errors:
        raise ConfigError("; ".join(errors))


# Settings accepted and validated but not acted on yet (docs/configuration.md): start-up warns once for
# each one that is not at its default, so a setting never silently does nothing.
_NOT_IMPLEMENTED: tuple[str, ...] = ()
# The feature gates the agent reads; every other gate is accepted and has no effect.
HONOURED_FEATURE_GATES = frozenset({"TaintTolerationComparisonOperators", "ExtendWebSocketsToKubelet",
                                    "GracefulNodeShutdown", "GracefulNodeShutdownBasedOnPodPriority"})
# 1.36 defaults of the gates read through feature_enabled().
_GATE_DEFAULTS = {"GracefulNodeShutdown": True, "GracefulNodeShutdownBasedOnPodPriority": True}


def not_implemented_warnings(config: KubeletConfig) -> list[str]:
    defaults = KubeletConfig()
    out = []
    for attr in _NOT_IMPLEMENTED:
        if getattr(config, attr) != getattr(defaults, attr):
            f = _BY_ATTR[attr]
            out.append(f"{f.yaml_name or f.flag} is accepted but not implemented: it has no effect")
    ignored = sorted(set(config.feature_gates) - HONOURED_FEATURE_GATES)
    if ignored:
        out.append(f"featureGates {', '.join(ignored)} are accepted but not implemented: they have no effect")
    return out


def flag_fields() -> list[tuple[str, str, type, str]]:
    """(flag, attribute, argparse type, help) of every setting that has a command-line flag."""
    return [(f.flag, f.attr, f.flag_type, f.flag_help) for f in _FIELDS if f.flag]


def file_fields() -> list[tuple[str, str, bool]]:
    """(attribute, YAML name, is a duration) of every setting a config file can hold, in file order."""
    durations = (_duration, _positive_duration, _cfs_period)
    return [(f.attr, f.yaml_name, f.parse in durations) for f in _FIELDS if f.yaml_name]


def config_fields() -> list[tuple[str, str | None, str | None, Any]]:
    """(attribute, YAML name, flag, default) for every setting; used by docs and tests."""
    defaults = KubeletConfig()
    return [(f.attr, f.yaml_name, f.flag, getattr(defaults, f.attr)) for f in _FIELDS]
