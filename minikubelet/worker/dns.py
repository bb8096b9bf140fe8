"""The pod's resolver configuration, as upstream pkg/kubelet/network/dns/dns.go GetPodDNS forms it.

Pure, except `read_host_dns`, which reads the node's resolv.conf (the kubelet's `resolvConf`).
The result goes into the sandbox config; the runtime writes it as the sandbox's resolv.conf, which
every container of the pod shares.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cri.types import DNSConfig
from minikubelet.base.podview import PodView

RESOLV_CONF_DEFAULT = "/etc/resolv.conf"
# pkg/apis/core/validation: the same limits the API server enforces on spec.dnsConfig
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
# Some resolvers (glibc 2.28) abort() on a search path longer than a DNS subdomain.
MAX_SEARCH_PATH_LENGTH = 253
MAX_RESOLV_CONF_BYTES = 10 << 20
DEFAULT_OPTIONS = ("ndots:5",)

MISSING_CLUSTER_DNS = "MissingClusterDNS"
DNS_CONFIG_FORMING = "DNSConfigForming"

POLICY_CLUSTER_FIRST = "ClusterFirst"
POLICY_CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
POLICY_DEFAULT = "Default"
POLICY_NONE = "None"


class DNSError(Exception):
    """The node's resolv.conf cannot be read or parsed; the sandbox cannot be configured."""


@dataclass(frozen=True)
class DNSSettings:
    """The kubelet's side of pod DNS: clusterDNS, clusterDomain, resolvConf and the node's IPs."""

    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = ""
    resolv_conf: str = RESOLV_CONF_DEFAULT  # "" = no host resolver config
    node_ips: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodDNS:
    config: DNSConfig
    # Warning events for the pod, (reason, message), in the order upstream records them
    events: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _option_name(option: str) -> str:
    return option.split(":", 1)[0]


def _append_options(options: Iterable[str], new: Iterable[str]) -> tuple[str, ...]:
    """A later option replaces an earlier one of the same name.

    Upstream keeps them in a Go map, so its order is random; ours is first appearance.
    """
    by_name: dict[str, str] = {}
    for option in (*options, *new):
        by_name[_option_name(option)] = option
    return tuple(by_name.values())


def parse_resolv_conf(text: str) -> DNSConfig:
    """nameserver lines accumulate; the last search line wins; options accumulate, the last of a name wins."""
    servers: list[str] = []
    searches: list[str] = []
    options: tuple[str, ...] = ()
    empty_nameserver = False
    for line in text.split("\n"):
        trimmed = line.strip()
        if trimmed.startswith("#"):
            continue
        words = trimmed.split()
        if not words:
            continue
        if words[0] == "nameserver":
            if len(words) >= 2:
                servers.append(words[1])
            else:
                empty_nameserver = True
        elif words[0] == "search":
            # A trailing dot is dropped, so a domain written both ways counts once against the limits.
            searches = [s.removesuffix(".") for s in words[1:] if s != "."]
        elif words[0] == "options":
            options = _append_options(options, words[1:])
    if empty_nameserver:
        raise DNSError("nameserver list is empty ")
    return DNSConfig(tuple(servers), tuple(searches), options)


def read_host_dns(path: str) -> DNSConfig:
    """The node's resolver config from `resolvConf`; empty when the setting is ""."""
    if not path:
        return DNSConfig()
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_RESOLV_CONF_BYTES + 1)
    except OSError as e:
        reason = (e.strerror or str(e)).lower()
        raise DNSError(f"open {path}: {reason}") from None
    try:
        if len(data) > MAX_RESOLV_CONF_BYTES:
            raise DNSError("the read limit is reached")
        return parse_resolv_conf(data.decode("utf-8", errors="replace"))
    except DNSError as e:
        raise DNSError(f"Encountered error while parsing resolv conf file. Error: {e}") from None


def _pod_dns_type(policy: str, host_network: bool) -> str:
    if policy == POLICY_NONE:
        return "none"
    if policy == POLICY_CLUSTER_FIRST_WITH_HOST_NET:
        return "cluster"
    if policy == POLICY_CLUSTER_FIRST:
        return "host" if host_network else "cluster"
    if policy == POLICY_DEFAULT:
        return "host"
    # The API server rejects any other policy; upstream logs it and treats it as ClusterFirst.
    return "cluster"


def cluster_searches(namespace: str, cluster_domain: str, host_searches: Iterable[str]) -> tuple[str, ...]:
    if not cluster_domain:
        return tuple(host_searches)
    ns_svc = f"{namespace}.svc.{cluster_domain}"
    return _dedupe((ns_svc, f"svc.{cluster_domain}", cluster_domain, *host_searches))


def _merge_pod_options(existing: Iterable[str], pod_options: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """Upstream mergeDNSOptions: a pod option replaces the existing one of its name; "name:" becomes "name"."""
    values: dict[str, str] = {}
    for option in existing:
        name, _, value = option.partition(":")
        values[name] = value
    for pod_option in pod_options:
        pod_value = pod_option.get("value")
        values[str(pod_option.get("name", ""))] = "" if pod_value is None else str(pod_value)
    return tuple(f"{name}:{value}" if value else name for name, value in values.items())


def _fit_nameservers(servers: tuple[str, ...], events: list[tuple[str, str]]) -> tuple[str, ...]:
    if len(servers) <= MAX_DNS_NAMESERVERS:
        return servers
    servers = servers[:MAX_DNS_NAMESERVERS]
    events.append((DNS_CONFIG_FORMING, "Nameserver limits were exceeded, some nameservers have been omitted, "
                                       f"the applied nameserver line is: {' '.join(servers)}"))
    return servers


def _fit_searches(searches: tuple[str, ...], events: list[tuple[str, str]]) -> tuple[str, ...]:
    exceeded = len(searches) > MAX_DNS_SEARCH_PATHS
    kept = [s for s in searches[:MAX_DNS_SEARCH_PATHS] if len(s) <= MAX_SEARCH_PATH_LENGTH]
    exceeded = exceeded or len(kept) < min(len(searches), MAX_DNS_SEARCH_PATHS)
    # Drop whole paths from the end until the line fits.
    while kept and len(" ".join(kept)) > MAX_DNS_SEARCH_LIST_CHARS:
        kept.pop()
        exceeded = True
    if exceeded:
        events.append((DNS_CONFIG_FORMING, "Search Line limits were exceeded, some search paths have been omitted, "
                                           f"the applied search line is: {' '.join(kept)}"))
    return tuple(kept)


def _localhost_servers(node_ips: Iterable[str]) -> tuple[str, ...]:
    servers = tuple("::1" if _is_ipv6(ip) else "127.0.0.1" for ip in node_ips)
    return servers or ("127.0.0.1",)


def _is_ipv6(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).version == 6
    except ValueError:
        return False


def missing_cluster_dns_message(pod: PodView) -> str:
    return (f'pod: "{pod.format_pod}". kubelet does not have ClusterDNS IP configured and cannot create Pod '
            f'using "{POLICY_CLUSTER_FIRST}" policy. Falling back to "{POLICY_DEFAULT}" policy.')


def pod_dns(pod: PodView, settings: DNSSettings, host: DNSConfig) -> PodDNS:
    """GetPodDNS: the policy's base config, then spec.dnsConfig appended, then the resolver's limits."""
    spec = pod.raw.get("spec") or {}
    events: list[tuple[str, str]] = []
    config = host
    kind = _pod_dns_type(str(spec.get("dnsPolicy") or ""), pod.host_network)
    if kind == "none":
        config = DNSConfig()
    elif kind == "cluster":
        if settings.cluster_dns:
            # The cluster DNS server is the only nameserver: it forwards what it cannot answer itself.
            config = DNSConfig(
                tuple(settings.cluster_dns),
                cluster_searches(pod.namespace, settings.cluster_domain, host.searches),
                DEFAULT_OPTIONS,
            )
        else:
            events.append((MISSING_CLUSTER_DNS, missing_cluster_dns_message(pod)))
            kind = "host"
    if kind == "host" and not settings.resolv_conf:
        # No host resolver config: point at the node itself and search nothing, instead of letting
        # the runtime fall back to its own /etc/resolv.conf.
        config = DNSConfig((*config.servers, *_localhost_servers(settings.node_ips)), (".",), config.options)

    extra = spec.get("dnsConfig")
    if isinstance(extra, dict):
        config = DNSConfig(
            _dedupe((*config.servers, *(str(s) for s in extra.get("nameservers") or ()))),
            _dedupe((*config.searches, *(str(s) for s in extra.get("searches") or ()))),
            _merge_pod_options(config.options, (o for o in extra.get("options") or () if isinstance(o, dict))),
        )
    servers = _fit_nameservers(config.servers, events)
    searches = _fit_searches(config.searches, events)
    return PodDNS(DNSConfig(servers, searches, config.options), tuple(events))
