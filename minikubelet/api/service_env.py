"""Service environment variables (upstream kubelet getServiceEnvVarMap and pkg/kubelet/envvars FromServices).

A container sees `<SVC>_SERVICE_HOST`, `<SVC>_SERVICE_PORT`, `<SVC>_SERVICE_PORT_<PORT>` and the Docker-link
style `<SVC>_PORT…` variables for every Service of its namespace that has a cluster IP (with
`enableServiceLinks`, the default), and always for the `kubernetes` Service of `default`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MASTER_NAMESPACE = "default"
MASTER_SERVICES = frozenset({"kubernetes"})


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def env_name(name: str) -> str:
    """Upstream makeEnvVariableName: upper case, `-` becomes `_`."""
    return name.replace("-", "_").upper()


def cluster_ip(service: Mapping[str, Any]) -> str:
    """The Service's cluster IP, "" when unset or "None" (headless: upstream IsServiceIPSet)."""
    ip = _dict(service.get("spec")).get("clusterIP")
    return ip if isinstance(ip, str) and ip not in ("", "None") else ""


def _ports(service: Mapping[str, Any]) -> list[tuple[str, int, str]]:
    """(name, port, protocol) of every well-formed port."""
    out = []
    ports = _dict(service.get("spec")).get("ports")
    for p in ports if isinstance(ports, list) else []:
        if not isinstance(p, dict):
            continue
        port = p.get("port")
        if not isinstance(port, int) or isinstance(port, bool):
            continue
        name = p.get("name")
        protocol = p.get("protocol")
        out.append((name if isinstance(name, str) else "", port, protocol if isinstance(protocol, str) and protocol
                    else "TCP"))
    return out


def _host_port(ip: str, port: int) -> str:
    """Go's net.JoinHostPort: brackets around an IPv6 address."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def from_service(service: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The variables of one Service (upstream FromServices for one element); none without a cluster IP or
    ports (the API server never stores a ClusterIP Service without ports)."""
    ip = cluster_ip(service)
    ports = _ports(service)
    name = _dict(service.get("metadata")).get("name")
    if not ip or not ports or not isinstance(name, str) or not name:
        return []
    prefix = env_name(name)
    out = [(f"{prefix}_SERVICE_HOST", ip), (f"{prefix}_SERVICE_PORT", str(ports[0][1]))]
    out += [(f"{prefix}_SERVICE_PORT_{env_name(pname)}", str(port)) for pname, port, _ in ports if pname]
    for i, (_, port, protocol) in enumerate(ports):
        url = f"{protocol.lower()}://{_host_port(ip, port)}"
        if i == 0:
            out.append((f"{prefix}_PORT", url))
        port_prefix = f"{prefix}_PORT_{port}_{protocol.upper()}"
        out += [(port_prefix, url), (f"{port_prefix}_PROTO", protocol.lower()), (f"{port_prefix}_PORT", str(port)),
                (f"{port_prefix}_ADDR", ip)]
    return out


def service_env_map(services: Iterable[Mapping[str, Any]], namespace: str, enable_service_links: bool) -> dict[str, str]:
    """Upstream getServiceEnvVarMap: the master Services of `default` always, the namespace's own with
    `enableServiceLinks`; a Service of the pod's namespace named like a master Service replaces it."""
    chosen: dict[str, Mapping[str, Any]] = {}
    for svc in services:
        md = _dict(svc.get("metadata"))
        name, ns = md.get("name"), md.get("namespace")
        if not isinstance(name, str) or not cluster_ip(svc):
            continue
        if ns == MASTER_NAMESPACE and name in MASTER_SERVICES:
            chosen.setdefault(name, svc)
        elif ns == namespace and enable_service_links:
            chosen[name] = svc
    env: dict[str, str] = {}
    for name in sorted(chosen):
        env.update(from_service(chosen[name]))
    return env
