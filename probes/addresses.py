"""Probe target addresses: port resolution and Go-style host:port joining."""

from __future__ import annotations

from collections.abc import Sequence

from minikubelet.base.podview import ContainerPort


class PortError(ValueError):
    """The probe names a port the container does not declare, or a number out of range."""


def resolve_port(port: object, ports: Sequence[ContainerPort]) -> int:
    """An int-or-string probe port: a number, or the name of one of the container's ports."""
    if isinstance(port, bool):
        raise PortError(f"invalid port number: {port}")
    if isinstance(port, int):
        number = port
    elif isinstance(port, str):
        named = [p for p in ports if p.name == port]
        if named:
            number = named[0].container_port
        else:
            # Upstream's last resort: a number written as a string.
            try:
                number = int(port)
            except ValueError:
                raise PortError(f"port {port!r} not found in the container's ports") from None
    else:
        raise PortError(f"invalid port: {port!r}")
    if not 0 < number < 65536:
        raise PortError(f"invalid port number: {number}")
    return number


def join_host_port(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"
