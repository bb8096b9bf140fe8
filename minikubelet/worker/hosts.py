"""The pod's hostname, domain and kubelet-managed /etc/hosts (upstream kubelet_pods.go, util.GetNodenameForKernel).

Everything here is pure except `write_hosts_file` and `read_node_hosts`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from minikubelet.api.names import dns1123_label_errors, dns1123_subdomain_errors
from minikubelet.base.goformat import go_quote
from minikubelet.base.podview import ContainerView, PodView

ETC_HOSTS = "/etc/hosts"
HOSTS_FILE_NAME = "etc-hosts"  # under the pod dir
MANAGED_HEADER = "# Kubernetes-managed hosts file.\n"
MANAGED_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
HOSTNAME_MAX_LEN = 63  # utsname's 64 bytes, less the terminating NUL
FQDN_MAX_LEN = 64  # upstream's limit for setHostnameAsFQDN


class HostnameError(ValueError):
    """The pod's hostname cannot be formed (the sandbox or the container then fails to start)."""


@dataclass(frozen=True)
class HostAlias:
    ip: str
    hostnames: tuple[str, ...]


def host_aliases(pod: PodView) -> tuple[HostAlias, ...]:
    spec: Mapping[str, Any] = pod.raw.get("spec") or {}
    aliases = spec.get("hostAliases")
    if not isinstance(aliases, list):
        return ()
    return tuple(
        HostAlias(str(a.get("ip", "")), tuple(str(h) for h in a.get("hostnames") or ()))
        for a in aliases
        if isinstance(a, dict)
    )


def _truncate_hostname(pod_name: str, hostname: str) -> str:
    if len(hostname) <= HOSTNAME_MAX_LEN:
        return hostname
    truncated = hostname[:HOSTNAME_MAX_LEN].rstrip("-.")
    if not truncated:
        raise HostnameError(f"hostname for pod {go_quote(pod_name)} was invalid: {go_quote(hostname)}")
    return truncated


def pod_hostname_and_domain(pod: PodView, cluster_domain: str) -> tuple[str, str]:
    """GeneratePodHostNameAndDomain: (short hostname, domain); the domain is "" without a subdomain."""
    spec: Mapping[str, Any] = pod.raw.get("spec") or {}
    override = spec.get("hostnameOverride")
    if isinstance(override, str):  # the HostnameOverride gate is on by default since v1.35
        msgs = dns1123_subdomain_errors(override)
        if msgs:
            raise HostnameError(f"pod HostnameOverride {go_quote(override)} is not a valid DNS subdomain: {';'.join(msgs)}")
        return _truncate_hostname(pod.name, override), ""
    hostname = pod.name
    if pod.hostname:
        msgs = dns1123_label_errors(pod.hostname)
        if msgs:
            raise HostnameError(f"pod Hostname {go_quote(pod.hostname)} is not a valid DNS label: {';'.join(msgs)}")
        hostname = pod.hostname
    hostname = _truncate_hostname(pod.name, hostname)
    subdomain = str(spec.get("subdomain") or "")
    if not subdomain:
        return hostname, ""
    msgs = dns1123_label_errors(subdomain)
    if msgs:
        raise HostnameError(f"pod Subdomain {go_quote(subdomain)} is not a valid DNS label: {';'.join(msgs)}")
    return hostname, f"{subdomain}.{pod.namespace}.svc.{cluster_domain}"


def kernel_hostname(hostname: str, domain: str, set_hostname_as_fqdn: bool) -> str:
    """GetNodenameForKernel: the UTS hostname, the FQDN when the pod asks for it and has a domain."""
    if not domain or not set_hostname_as_fqdn:
        return hostname
    fqdn = f"{hostname}.{domain}"
    if len(fqdn) > FQDN_MAX_LEN:
        raise HostnameError(
            f"failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long "
            f"({FQDN_MAX_LEN} characters is the max, {len(fqdn)} characters requested)"
        )
    return fqdn


def sandbox_hostname(pod: PodView, cluster_domain: str) -> str:
    """The sandbox's hostname: none for a host-network pod (it keeps the node's)."""
    if pod.host_network:
        return ""
    hostname, domain = pod_hostname_and_domain(pod, cluster_domain)
    spec: Mapping[str, Any] = pod.raw.get("spec") or {}
    return kernel_hostname(hostname, domain, spec.get("setHostnameAsFQDN") is True)


def _alias_entries(aliases: Iterable[HostAlias]) -> str:
    # one line per IP, its names tab-separated
    lines = [f"{a.ip}\t" + "\t".join(a.hostnames) + "\n" for a in aliases]
    if not lines:
        return ""
    return "\n# Entries added by HostAliases.\n" + "".join(lines)


def managed_hosts_content(pod_ips: Iterable[str], hostname: str, domain: str, aliases: Iterable[HostAlias]) -> str:
    """managedHostsFileContent: localhost, the IPv6 block, each pod IP -> (FQDN and) hostname, then aliases."""
    out = [
        MANAGED_HEADER,
        "127.0.0.1\tlocalhost\n",
        "::1\tlocalhost ip6-localhost ip6-loopback\n",
        "fe00::0\tip6-localnet\n",
        "fe00::0\tip6-mcastprefix\n",
        "fe00::1\tip6-allnodes\n",
        "fe00::2\tip6-allrouters\n",
    ]
    for ip in pod_ips:
        out.append(f"{ip}\t{hostname}.{domain}\t{hostname}\n" if domain else f"{ip}\t{hostname}\n")
    out.append(_alias_entries(aliases))
    return "".join(out)


def host_network_hosts_content(node_hosts: str, aliases: Iterable[HostAlias]) -> str:
    """nodeHostsFileContent: the node's own hosts file under a header, then the aliases."""
    return MANAGED_HEADER_HOST_NETWORK + node_hosts + _alias_entries(aliases)


def should_mount_hosts_file(pod: PodView, pod_ips: tuple[str, ...], container: ContainerView) -> bool:
    """Only with a pod IP or host networking, and never over a volume the container mounts at /etc/hosts."""
    if not pod_ips and not pod.host_network:
        return False
    return all(m.mount_path != ETC_HOSTS for m in container.volume_mounts)


def hosts_content(pod: PodView, pod_ips: tuple[str, ...], cluster_domain: str, node_hosts: str) -> str:
    """The file for this pod; `node_hosts` (the node's /etc/hosts) is used only with host networking."""
    aliases = host_aliases(pod)
    if pod.host_network:
        return host_network_hosts_content(node_hosts, aliases)
    hostname, domain = pod_hostname_and_domain(pod, cluster_domain)
    return managed_hosts_content(pod_ips, hostname, domain, aliases)


def read_node_hosts() -> str:
    with open(ETC_HOSTS, encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read()


def write_hosts_file(pod_dir: str, content: str) -> str:
    """Write <pod dir>/etc-hosts in place (running containers bind-mount this inode); returns its path."""
    os.makedirs(pod_dir, mode=0o750, exist_ok=True)
    path = os.path.join(pod_dir, HOSTS_FILE_NAME)
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(content)
    os.chmod(path, 0o644)
    return path
