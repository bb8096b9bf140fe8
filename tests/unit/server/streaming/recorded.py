"""The recorded kubelet-API streaming scenarios (tests/fixtures/kubernetes/kubelet-api/) and their decoded frames."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from cri.spdy import (
    DataFrame,
    Frame,
    GoAway,
    HeadersFrame,
    Ping,
    RstStream,
    Settings,
    SynReply,
    SynStream,
    WindowUpdate,
)
from tests.fixtures import KUBERNETES

KUBELET_API = KUBERNETES / "kubelet-api"
SPDY_SCENARIOS = ("exec-echo-spdy", "exec-echo-legacyspdy", "exec-exit3-spdy", "exec-stdin-spdy",
                  "exec-tty-resize-spdy", "attach-spdy", "cp-spdy", "portforward-spdy")
WS_SCENARIOS = ("exec-echo-ws", "exec-exit3-ws", "exec-stdin-ws", "exec-tty-resize-ws", "attach-ws", "cp-ws")
DIRECTIONS = ("c2s", "s2c")


@dataclass(frozen=True)
class Recording:
    name: str
    connection: dict[str, Any]

    def raw(self, direction: str) -> bytes:
        return (KUBELET_API / self.name / f"{direction}.bin").read_bytes()

    def after_head(self, direction: str) -> bytes:
        """The bytes after the HTTP/1.1 request or 101 response head: the upgraded protocol's stream."""
        raw = self.raw(direction)
        return raw[raw.index(b"\r\n\r\n") + 4:]

    def frames(self, direction: str, key: str = "frames") -> list[dict[str, Any]]:
        return [f for f in self.connection[key] if f["dir"] == direction]

    def response_head(self) -> bytes:
        raw = self.raw("s2c")
        return raw[:raw.index(b"\r\n\r\n") + 4]


def load(name: str) -> Recording:
    doc = json.loads((KUBELET_API / name / "frames.json").read_text())
    return Recording(name, doc["connections"][0])


def recorded_data(entry: dict[str, Any]) -> tuple[bytes | None, int]:
    """The recorded payload (None when truncated by the recorder) and its full length."""
    data = entry.get("data") or entry.get("payload") or {}
    length = int(data.get("len", 0))
    if str(data.get("truncated", "")).lower() == "true":
        return None, length
    if "text" in data:
        return str(data["text"]).encode("utf-8"), length
    if "base64" in data:
        return base64.b64decode(data["base64"]), length
    return b"", length


def as_recorded(frame: Frame) -> dict[str, Any]:
    """Our frame in the recorder's vocabulary (frames.json), for field-by-field comparison."""
    flags = []
    match frame:
        case DataFrame(stream_id, data, fin):
            return {"kind": "data", "stream_id": stream_id, "flags": ["FIN"] if fin else [], "length": len(data)}
        case SynStream():
            flags = ["FIN"] if frame.fin else []
            return {"type": "SYN_STREAM", "flags": flags, "stream_id": frame.stream_id,
                    "assoc_stream_id": frame.assoc_stream_id, "priority": frame.priority,
                    "headers": [list(h) for h in frame.headers]}
        case SynReply(stream_id, headers, fin):
            return {"type": "SYN_REPLY", "flags": ["FIN"] if fin else [], "stream_id": stream_id,
                    "headers": [list(h) for h in headers]}
        case RstStream(stream_id, status):
            return {"type": "RST_STREAM", "flags": flags, "stream_id": stream_id, "status": status.name}
        case GoAway(last, status):
            return {"type": "GOAWAY", "flags": flags, "last_good_stream_id": last, "status": int(status)}
        case Ping(ping_id):
            return {"type": "PING", "flags": flags, "ping_id": ping_id}
        case HeadersFrame(stream_id, headers, fin):
            return {"type": "HEADERS", "stream_id": stream_id, "headers": [list(h) for h in headers]}
        case WindowUpdate(stream_id, delta):
            return {"type": "WINDOW_UPDATE", "stream_id": stream_id, "delta": delta}
        case Settings(values, _):
            return {"type": "SETTINGS", "values": [[s.id, s.value] for s in values]}
    raise TypeError(frame)


def recorded_view(entry: dict[str, Any]) -> dict[str, Any]:
    """The same keys as `as_recorded` picks, from a frames.json entry."""
    keys: tuple[str, ...]
    if entry["kind"] == "data":
        keys = ("kind", "stream_id", "flags", "length")
    else:
        keys = tuple(k for k in ("type", "flags", "stream_id", "assoc_stream_id", "priority", "headers", "status",
                                 "last_good_stream_id", "ping_id") if k in entry)
    return {k: entry[k] for k in keys}
