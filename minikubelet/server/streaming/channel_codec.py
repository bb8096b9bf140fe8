"""The Kubernetes channel protocols carried in WebSocket messages, without I/O (upstream `wsstream`).

remotecommand (`v5.channel.k8s.io`, `v4.channel.k8s.io`, `channel.k8s.io`, and the `base64.` variants): every
message is one channel byte (0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize) followed by that channel's
data; base64 protocols send the channel as an ASCII digit and the data base64-encoded in a text message.
v5 adds `0xFF <channel>`: the client closed that channel (end of stdin).

port-forward over plain channels (`v4.channel.k8s.io` with `?port=` query): ports[i] owns channels 2i (data,
read/write) and 2i+1 (error, write-only); the server's first message on each is the port, 2 bytes little-endian.

`SPDY/3.1+portforward.k8s.io` carries no channel bytes at all: the messages concatenate into a SPDY byte stream.
"""

from __future__ import annotations

import base64
import binascii
import enum
import struct
from dataclasses import dataclass

V5_BINARY = "v5.channel.k8s.io"
V4_BINARY = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1_BINARY = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"
SPDY_TUNNEL_PREFIX = "SPDY/3.1+"
PORTFORWARD_TUNNEL = SPDY_TUNNEL_PREFIX + "portforward.k8s.io"

# Server preference does not matter: upstream takes the client's first protocol it supports.
REMOTECOMMAND_PROTOCOLS = (V5_BINARY, V4_BINARY, V4_BASE64, V1_BINARY, V1_BASE64)
PORTFORWARD_PROTOCOLS = (PORTFORWARD_TUNNEL, V4_BINARY, V4_BASE64)

CLOSE_SIGNAL = 0xFF


class Channel(enum.IntEnum):
    STDIN = 0
    STDOUT = 1
    STDERR = 2
    ERROR = 3
    RESIZE = 4


class ChannelError(ValueError):
    pass


@dataclass(frozen=True)
class ChannelData:
    channel: int
    data: bytes


@dataclass(frozen=True)
class ChannelClosed:
    channel: int


def is_base64(protocol: str) -> bool:
    return "base64." in protocol


def supports_close(protocol: str) -> bool:
    return protocol == V5_BINARY


def is_tunnel(protocol: str) -> bool:
    return protocol.startswith(SPDY_TUNNEL_PREFIX) and protocol.endswith(".k8s.io")


def negotiate(offered: list[str], supported: tuple[str, ...]) -> str | None:
    """upstream wsstream `handshake`: the first offered protocol the server supports ("" when none offered)."""
    return next((p for p in offered or [""] if p in supported), None)


def encode(protocol: str, channel: int, data: bytes) -> bytes | str:
    if not 0 <= channel < CLOSE_SIGNAL:
        raise ChannelError(f"channel {channel}")
    if is_base64(protocol):
        return chr(ord("0") + channel) + base64.b64encode(data).decode("ascii")
    return bytes((channel,)) + data


def encode_close(protocol: str, channel: int) -> bytes:
    if not supports_close(protocol):
        raise ChannelError(f"{protocol or 'the unnamed protocol'} has no close-channel message")
    return bytes((CLOSE_SIGNAL, channel))


def decode(protocol: str, message: bytes | str, channels: int) -> ChannelData | ChannelClosed | None:
    """One received message; None for an empty one (upstream skips those). `channels` bounds valid numbers."""
    raw = message.encode("latin-1") if isinstance(message, str) else message
    if not raw:
        return None
    if supports_close(protocol) and raw[0] == CLOSE_SIGNAL:
        if len(raw) != 2:
            raise ChannelError(f"close signal with {len(raw) - 1} bytes after it")
        if raw[1] >= channels:
            raise ChannelError(f"close of channel {raw[1]}")
        return ChannelClosed(raw[1])
    if is_base64(protocol):
        channel = raw[0] - ord("0")
        try:
            data = base64.b64decode(raw[1:], validate=True)
        except binascii.Error as exc:
            raise ChannelError(f"base64: {exc}") from None
    else:
        channel, data = raw[0], raw[1:]
    if not 0 <= channel < channels:
        raise ChannelError(f"channel {channel} of {channels}")
    return ChannelData(channel, data)


@dataclass(frozen=True)
class PortForwardLayout:
    """Channel numbers of the plain-channel port-forward protocol for the `?port=` list of the request."""

    ports: tuple[int, ...]

    @property
    def channels(self) -> int:
        return 2 * len(self.ports)

    def data_channel(self, index: int) -> int:
        return 2 * index

    def error_channel(self, index: int) -> int:
        return 2 * index + 1

    def port_of(self, channel: int) -> int:
        return self.ports[channel // 2]

    def is_data(self, channel: int) -> bool:
        return channel % 2 == 0

    @staticmethod
    def port_prefix(port: int) -> bytes:
        return struct.pack("<H", port)


def parse_ports(values: list[str]) -> tuple[int, ...]:
    """upstream `NewV4Options`: repeated and/or comma-separated `port` values, each 1..65535."""
    if not values:
        raise ChannelError('query parameter "port" is required')
    ports = []
    for value in values:
        if not value:
            raise ChannelError('query parameter "port" cannot be empty')
        for item in value.split(","):
            if not item.isdigit() or not 0 < int(item) <= 0xFFFF:
                raise ChannelError(f"unable to parse {value!r} as a port")
            ports.append(int(item))
    return tuple(ports)
