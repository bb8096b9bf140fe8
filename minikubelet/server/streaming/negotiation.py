"""Upgrade negotiation for the kubelet's streaming endpoints, as upstream's `httpstream.Handshake` does it.

The client lists `X-Stream-Protocol-Version` values (repeated and/or comma-separated) in its order of preference;
the first one the server supports wins. The kubelet's SPDY side (cri-streaming) supports remotecommand v4..v1 and
`portforward.k8s.io`, so the v1.36 API server's offer `v5, v4, v3, v2, channel.k8s.io` yields v4, as recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SPDY_31 = "SPDY/3.1"
PROTOCOL_HEADER = "X-Stream-Protocol-Version"
ACCEPTED_HEADER = "X-Accepted-Stream-Protocol-Versions"

REMOTECOMMAND_V5 = "v5.channel.k8s.io"
REMOTECOMMAND_V4 = "v4.channel.k8s.io"
REMOTECOMMAND_V3 = "v3.channel.k8s.io"
REMOTECOMMAND_V2 = "v2.channel.k8s.io"
REMOTECOMMAND_V1 = "channel.k8s.io"
PORTFORWARD_V1 = "portforward.k8s.io"

# v5 adds only the WebSocket close-channel message; over SPDY a FIN closes stdin, so upstream stops at v4 here.
REMOTECOMMAND_SPDY_PROTOCOLS = (REMOTECOMMAND_V4, REMOTECOMMAND_V3, REMOTECOMMAND_V2, REMOTECOMMAND_V1)
PORTFORWARD_SPDY_PROTOCOLS = (PORTFORWARD_V1,)


@dataclass(frozen=True)
class Accepted:
    protocol: str

    def headers(self) -> tuple[tuple[str, str], ...]:
        """The 101's headers as the recorded kubelet (Go's net/http: sorted, no Date) wrote them."""
        return (("Connection", "Upgrade"), ("Upgrade", SPDY_31), (PROTOCOL_HEADER, self.protocol))

    def response(self) -> bytes:
        """The whole 101, as the recorded kubelet wrote it."""
        fields = "".join(f"{k}: {v}\r\n" for k, v in self.headers())
        return f"HTTP/1.1 101 Switching Protocols\r\n{fields}\r\n".encode("ascii")


@dataclass(frozen=True)
class Rejected:
    status: int
    message: str
    headers: tuple[tuple[str, str], ...] = ()


def is_spdy_upgrade(connection: str, upgrade: str) -> bool:
    """upstream `UpgradeResponse`: substring matches, case-insensitive."""
    return "upgrade" in connection.lower() and SPDY_31.lower() in upgrade.lower()


def offered_protocols(values: Iterable[str]) -> list[str]:
    return [p.strip() for value in values for p in value.split(",") if p.strip()]


def negotiate(offered: Iterable[str], supported: Iterable[str]) -> str | None:
    allowed = set(supported)
    return next((p for p in offered if p in allowed), None)


def handshake(headers: Mapping[str, list[str]], supported: tuple[str, ...]) -> Accepted | Rejected:
    """`headers` maps lowercase names to every value the request carried."""
    values = headers.get(PROTOCOL_HEADER.lower())
    if not values:
        return Rejected(400, f"unable to upgrade: header {PROTOCOL_HEADER} does not exist in request")
    offered = offered_protocols(values)
    if not offered:
        return Rejected(400, f"unable to upgrade: header {PROTOCOL_HEADER} contains no valid protocols")
    chosen = negotiate(offered, supported)
    if chosen is None:
        return Rejected(
            403,
            f"unable to upgrade: unable to negotiate protocol: client supports {offered}, server accepts "
            f"{list(supported)}",
            tuple((ACCEPTED_HEADER, p) for p in supported),
        )
    return Accepted(chosen)
