"""SPDY/3.1 framing (draft-mbelshe-httpbis-spdy-00 plus the 3.1 flow-control changes), without I/O.

`FrameDecoder` turns bytes into frames (partial frames are buffered; every length is checked against `Limits`
before anything is buffered or inflated), `FrameEncoder` turns frames into bytes. Each owns the one zlib context
its direction of a connection uses for every header block, so one connection needs exactly one of each, used in
order. `FlowWindow` and `StreamState` hold the per-stream rules the connection applies.

No maintained Python library implements SPDY (docs/decisions.md); the wire facts follow the draft and the peer
Kubernetes actually talks to, moby/spdystream.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass, field

from cri.spdy_dictionary import HEADER_DICTIONARY

VERSION = 3
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
FLAG_SETTINGS_CLEAR = 0x01
FRAME_HEADER_SIZE = 8
MAX_LENGTH = (1 << 24) - 1
MAX_STREAM_ID = (1 << 31) - 1
MAX_WINDOW = (1 << 31) - 1
DEFAULT_INITIAL_WINDOW = 64 * 1024

Headers = tuple[tuple[str, str], ...]


class FrameType(enum.IntEnum):
    SYN_STREAM = 1
    SYN_REPLY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PING = 6
    GOAWAY = 7
    HEADERS = 8
    WINDOW_UPDATE = 9


class RstStatus(enum.IntEnum):
    PROTOCOL_ERROR = 1
    INVALID_STREAM = 2
    REFUSED_STREAM = 3
    UNSUPPORTED_VERSION = 4
    CANCEL = 5
    INTERNAL_ERROR = 6
    FLOW_CONTROL_ERROR = 7
    STREAM_IN_USE = 8
    STREAM_ALREADY_CLOSED = 9
    INVALID_CREDENTIALS = 10
    FRAME_TOO_LARGE = 11


class GoAwayStatus(enum.IntEnum):
    OK = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2


class SettingId(enum.IntEnum):
    UPLOAD_BANDWIDTH = 1
    DOWNLOAD_BANDWIDTH = 2
    ROUND_TRIP_TIME = 3
    MAX_CONCURRENT_STREAMS = 4
    CURRENT_CWND = 5
    DOWNLOAD_RETRANS_RATE = 6
    INITIAL_WINDOW_SIZE = 7
    CLIENT_CERTIFICATE_VECTOR_SIZE = 8


class SpdyError(Exception):
    """A protocol violation. `stream_id` 0 means the connection is unusable (GOAWAY); otherwise RST_STREAM."""

    def __init__(self, message: str, *, stream_id: int = 0, status: RstStatus = RstStatus.PROTOCOL_ERROR) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.status = status


@dataclass(frozen=True)
class Limits:
    """Bounds on what a peer can make us buffer or inflate."""

    max_data_payload: int = 1 << 20
    max_control_payload: int = 64 * 1024
    max_header_block: int = 32 * 1024  # decompressed bytes per header block
    max_headers: int = 64
    max_settings: int = 16


@dataclass(frozen=True)
class DataFrame:
    stream_id: int
    data: bytes = b""
    fin: bool = False


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    assoc_stream_id: int = 0
    priority: int = 0
    slot: int = 0
    fin: bool = False
    unidirectional: bool = False


@dataclass(frozen=True)
class SynReply:
    stream_id: int
    headers: Headers = ()
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: RstStatus


@dataclass(frozen=True)
class Setting:
    id: int
    value: int
    flags: int = 0


@dataclass(frozen=True)
class Settings:
    values: tuple[Setting, ...] = ()
    clear: bool = False


@dataclass(frozen=True)
class Ping:
    ping_id: int


@dataclass(frozen=True)
class GoAway:
    last_good_stream_id: int
    status: GoAwayStatus = GoAwayStatus.OK


@dataclass(frozen=True)
class HeadersFrame:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class WindowUpdate:
    stream_id: int
    delta: int


Frame = DataFrame | SynStream | SynReply | RstStream | Settings | Ping | GoAway | HeadersFrame | WindowUpdate


def header(headers: Headers, name: str) -> str | None:
    """The value of `name` (matched case-insensitively: Go writes `streamType`, the wire carries lowercase)."""
    wanted = name.lower()
    for key, value in headers:
        if key == wanted:
            return value
    return None


# -- decoding -------------------------------------------------------------------------------------------------


class HeaderDecompressor:
    """The receive direction's zlib context: one stream for all header blocks of a connection."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._inflater = zlib.decompressobj(zdict=HEADER_DICTIONARY)

    def decompress(self, block: bytes, stream_id: int) -> Headers:
        limit = self._limits.max_header_block
        try:
            raw = self._inflater.decompress(block, limit + 1)
        except zlib.error as exc:
            raise SpdyError(f"header block: zlib: {exc}") from None
        if len(raw) > limit or self._inflater.unconsumed_tail:
            raise SpdyError(f"header block inflates beyond {limit} bytes")
        if self._inflater.eof:
            raise SpdyError("header block ended the zlib stream")
        return _parse_header_block(raw, stream_id, self._limits)


def _parse_header_block(raw: bytes, stream_id: int, limits: Limits) -> Headers:
    if len(raw) < 4:
        raise SpdyError("header block shorter than its count", stream_id=stream_id)
    (count,) = struct.unpack_from(">I", raw, 0)
    if count > limits.max_headers:
        raise SpdyError(f"{count} headers, more than {limits.max_headers}")
    pos = 4
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _ in range(count):
        name_bytes, pos = _length_prefixed(raw, pos)
        value_bytes, pos = _length_prefixed(raw, pos)
        name = name_bytes.decode("latin-1")
        if not name or name != name.lower():
            raise SpdyError(f"header name {name[:40]!r} is empty or not lowercase")
        if name in seen:
            raise SpdyError(f"header {name[:40]!r} repeated")
        seen.add(name)
        pairs.append((name, value_bytes.decode("latin-1")))
    if pos != len(raw):
        raise SpdyError("bytes after the last header")
    return tuple(pairs)


def _length_prefixed(raw: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 4 > len(raw):
        raise SpdyError("header block truncated")
    (length,) = struct.unpack_from(">I", raw, pos)
    end = pos + 4 + length
    if end > len(raw):
        raise SpdyError("header block truncated")
    return raw[pos + 4:end], end


class FrameDecoder:
    """Bytes in, frames out. After a `SpdyError` the decoder is poisoned: the zlib context may be out of step."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._buf = bytearray()
        self._headers = HeaderDecompressor(self.limits)
        self._failed: SpdyError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        if self._failed is not None:
            raise self._failed
        self._buf += data
        frames: list[Frame] = []
        try:
            while (frame_len := self._complete_frame_length()) is not None:
                chunk = bytes(self._buf[:frame_len])
                del self._buf[:frame_len]
                frame = self._decode(chunk)
                if frame is not None:
                    frames.append(frame)
        except SpdyError as exc:
            self._failed = exc
            self._buf.clear()
            raise
        return frames

    def _complete_frame_length(self) -> int | None:
        if len(self._buf) < FRAME_HEADER_SIZE:
            return None
        first, flags_len = struct.unpack_from(">II", self._buf, 0)
        length = flags_len & MAX_LENGTH
        if first & 0x80000000:
            version = (first >> 16) & 0x7FFF
            if version != VERSION:
                raise SpdyError(f"SPDY version {version}, not {VERSION}", status=RstStatus.UNSUPPORTED_VERSION)
            limit = self.limits.max_control_payload
        else:
            limit = self.limits.max_data_payload
        if length > limit:
            raise SpdyError(f"frame payload of {length} bytes, limit {limit}", status=RstStatus.FRAME_TOO_LARGE)
        total = FRAME_HEADER_SIZE + length
        return total if len(self._buf) >= total else None

    def _decode(self, chunk: bytes) -> Frame | None:
        first, flags_len = struct.unpack_from(">II", chunk, 0)
        flags = flags_len >> 24
        payload = chunk[FRAME_HEADER_SIZE:]
        if not first & 0x80000000:
            stream_id = first & MAX_STREAM_ID
            if stream_id == 0:
                raise SpdyError("DATA frame on stream 0")
            return DataFrame(stream_id, payload, bool(flags & FLAG_FIN))
        try:
            kind = FrameType(first & 0xFFFF)
        except ValueError:
            return None  # the draft: unknown control frames are ignored
        return _CONTROL_DECODERS[kind](self, flags, payload)

    def _syn_stream(self, flags: int, payload: bytes) -> Frame:
        _need(payload, 10, "SYN_STREAM")
        stream_id, assoc, prio, slot = struct.unpack_from(">IIBB", payload, 0)
        stream_id = _nonzero_stream(stream_id, "SYN_STREAM")
        return SynStream(stream_id, self._headers.decompress(payload[10:], stream_id), assoc & MAX_STREAM_ID,
                         prio >> 5, slot, bool(flags & FLAG_FIN), bool(flags & FLAG_UNIDIRECTIONAL))

    def _syn_reply(self, flags: int, payload: bytes) -> Frame:
        _need(payload, 4, "SYN_REPLY")
        stream_id = _nonzero_stream(struct.unpack_from(">I", payload, 0)[0], "SYN_REPLY")
        return SynReply(stream_id, self._headers.decompress(payload[4:], stream_id), bool(flags & FLAG_FIN))

    def _headers_frame(self, flags: int, payload: bytes) -> Frame:
        _need(payload, 4, "HEADERS")
        stream_id = _nonzero_stream(struct.unpack_from(">I", payload, 0)[0], "HEADERS")
        return HeadersFrame(stream_id, self._headers.decompress(payload[4:], stream_id), bool(flags & FLAG_FIN))

    def _rst_stream(self, flags: int, payload: bytes) -> Frame:
        _exact(payload, 8, "RST_STREAM")
        stream_id, status = struct.unpack(">II", payload)
        stream_id = _nonzero_stream(stream_id, "RST_STREAM")
        try:
            return RstStream(stream_id, RstStatus(status))
        except ValueError:
            raise SpdyError(f"RST_STREAM status {status}") from None

    def _settings(self, flags: int, payload: bytes) -> Frame:
        _need(payload, 4, "SETTINGS")
        (count,) = struct.unpack_from(">I", payload, 0)
        if count > self.limits.max_settings or len(payload) != 4 + 8 * count:
            raise SpdyError(f"SETTINGS with {count} entries in {len(payload)} bytes")
        values = []
        for i in range(count):
            flag_id, value = struct.unpack_from(">II", payload, 4 + 8 * i)
            values.append(Setting(flag_id & 0xFFFFFF, value, flag_id >> 24))
        return Settings(tuple(values), bool(flags & FLAG_SETTINGS_CLEAR))

    def _ping(self, flags: int, payload: bytes) -> Frame:
        _exact(payload, 4, "PING")
        return Ping(struct.unpack(">I", payload)[0])

    def _goaway(self, flags: int, payload: bytes) -> Frame:
        _exact(payload, 8, "GOAWAY")
        last, status = struct.unpack(">II", payload)
        try:
            return GoAway(last & MAX_STREAM_ID, GoAwayStatus(status))
        except ValueError:
            raise SpdyError(f"GOAWAY status {status}") from None

    def _window_update(self, flags: int, payload: bytes) -> Frame:
        _exact(payload, 8, "WINDOW_UPDATE")
        stream_id, delta = struct.unpack(">II", payload)
        delta &= MAX_WINDOW
        if delta == 0:
            raise SpdyError("WINDOW_UPDATE with delta 0", stream_id=stream_id & MAX_STREAM_ID)
        return WindowUpdate(stream_id & MAX_STREAM_ID, delta)


_CONTROL_DECODERS = {
    FrameType.SYN_STREAM: FrameDecoder._syn_stream,
    FrameType.SYN_REPLY: FrameDecoder._syn_reply,
    FrameType.RST_STREAM: FrameDecoder._rst_stream,
    FrameType.SETTINGS: FrameDecoder._settings,
    FrameType.PING: FrameDecoder._ping,
    FrameType.GOAWAY: FrameDecoder._goaway,
    FrameType.HEADERS: FrameDecoder._headers_frame,
    FrameType.WINDOW_UPDATE: FrameDecoder._window_update,
}


def _need(payload: bytes, size: int, what: str) -> None:
    if len(payload) < size:
        raise SpdyError(f"{what} payload of {len(payload)} bytes")


def _exact(payload: bytes, size: int, what: str) -> None:
    if len(payload) != size:
        raise SpdyError(f"{what} payload of {len(payload)} bytes, not {size}")


def _nonzero_stream(raw: int, what: str) -> int:
    stream_id = raw & MAX_STREAM_ID
    if stream_id == 0:
        raise SpdyError(f"{what} on stream 0")
    return stream_id


# -- encoding -------------------------------------------------------------------------------------------------


class FrameEncoder:
    """Frames in, bytes out; the send direction's zlib context (sync-flushed after every header block)."""

    def __init__(self) -> None:
        self._deflater = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS, zdict=HEADER_DICTIONARY)

    def encode(self, frame: Frame) -> bytes:
        match frame:
            case DataFrame(stream_id, data, fin):
                _check_stream_id(stream_id)
                _check_length(len(data))
                return struct.pack(">II", stream_id, (FLAG_FIN if fin else 0) << 24 | len(data)) + data
            case SynStream():
                _check_stream_id(frame.stream_id)
                flags = (FLAG_FIN if frame.fin else 0) | (FLAG_UNIDIRECTIONAL if frame.unidirectional else 0)
                body = struct.pack(">IIBB", frame.stream_id, frame.assoc_stream_id, (frame.priority & 7) << 5,
                                   frame.slot)
                return _control(FrameType.SYN_STREAM, flags, body + self._compress(frame.headers))
            case SynReply(stream_id, headers, fin):
                _check_stream_id(stream_id)
                body = struct.pack(">I", stream_id) + self._compress(headers)
                return _control(FrameType.SYN_REPLY, FLAG_FIN if fin else 0, body)
            case HeadersFrame(stream_id, headers, fin):
                _check_stream_id(stream_id)
                body = struct.pack(">I", stream_id) + self._compress(headers)
                return _control(FrameType.HEADERS, FLAG_FIN if fin else 0, body)
            case RstStream(stream_id, status):
                _check_stream_id(stream_id)
                return _control(FrameType.RST_STREAM, 0, struct.pack(">II", stream_id, status))
            case Settings(values, clear):
                body = struct.pack(">I", len(values)) + b"".join(
                    struct.pack(">II", (s.flags & 0xFF) << 24 | (s.id & 0xFFFFFF), s.value) for s in values)
                return _control(FrameType.SETTINGS, FLAG_SETTINGS_CLEAR if clear else 0, body)
            case Ping(ping_id):
                return _control(FrameType.PING, 0, struct.pack(">I", ping_id))
            case GoAway(last, status):
                return _control(FrameType.GOAWAY, 0, struct.pack(">II", last, status))
            case WindowUpdate(stream_id, delta):
                if not 0 < delta <= MAX_WINDOW:
                    raise ValueError(f"window delta {delta}")
                return _control(FrameType.WINDOW_UPDATE, 0, struct.pack(">II", stream_id, delta))
        raise TypeError(f"not a SPDY frame: {frame!r}")

    def _compress(self, headers: Headers) -> bytes:
        parts = [struct.pack(">I", len(headers))]
        for name, value in headers:
            if not name or name != name.lower():
                raise ValueError(f"SPDY header names are lowercase: {name!r}")
            for text in (name, value):
                raw = text.encode("latin-1")
                parts.append(struct.pack(">I", len(raw)) + raw)
        return self._deflater.compress(b"".join(parts)) + self._deflater.flush(zlib.Z_SYNC_FLUSH)


def _control(kind: FrameType, flags: int, body: bytes) -> bytes:
    _check_length(len(body))
    return struct.pack(">HHI", 0x8000 | VERSION, kind, flags << 24 | len(body)) + body


def _check_length(length: int) -> None:
    if length > MAX_LENGTH:
        raise ValueError(f"frame payload of {length} bytes exceeds the 24-bit length")


def _check_stream_id(stream_id: int) -> None:
    if not 0 < stream_id <= MAX_STREAM_ID:
        raise ValueError(f"stream id {stream_id}")


# -- flow control and stream state ----------------------------------------------------------------------------


@dataclass
class FlowWindow:
    """One direction of one stream's SPDY/3.1 window (§2.6.8): DATA payload bytes spend it, WINDOW_UPDATE refills."""

    size: int = DEFAULT_INITIAL_WINDOW

    def spend(self, n: int) -> None:
        self.size -= n

    def grow(self, delta: int) -> None:
        if self.size + delta > MAX_WINDOW:
            raise SpdyError(f"window would exceed {MAX_WINDOW}", status=RstStatus.FLOW_CONTROL_ERROR)
        self.size += delta

    def adjust_initial(self, old: int, new: int) -> None:
        """A SETTINGS INITIAL_WINDOW_SIZE change moves every open window by the difference (may go negative)."""
        self.size += new - old


@dataclass
class StreamState:
    """Half-close bookkeeping of one stream, from our side of the connection."""

    stream_id: int
    local_closed: bool = False  # we sent FIN
    remote_closed: bool = False  # the peer sent FIN
    reset: bool = False
    send_window: FlowWindow = field(default_factory=FlowWindow)
    recv_window: FlowWindow = field(default_factory=FlowWindow)

    @property
    def closed(self) -> bool:
        return self.reset or (self.local_closed and self.remote_closed)

    def on_data(self, length: int, fin: bool) -> None:
        """Account for a received DATA frame; raises the RST_STREAM status the draft prescribes."""
        if self.remote_closed:
            raise SpdyError(f"DATA after FIN on stream {self.stream_id}", stream_id=self.stream_id,
                            status=RstStatus.STREAM_ALREADY_CLOSED)
        self.recv_window.spend(length)
        if fin:
            self.remote_closed = True

    def on_remote_fin(self) -> None:
        self.remote_closed = True

    def on_local_fin(self) -> None:
        if self.local_closed:
            raise SpdyError(f"stream {self.stream_id} already half-closed", stream_id=self.stream_id,
                            status=RstStatus.STREAM_ALREADY_CLOSED)
        self.local_closed = True

    def on_reset(self) -> None:
        self.reset = True
