"""Frame round trips, hostile input rejected with a bounded error, flow windows and stream state."""

from __future__ import annotations

import struct
import zlib

import pytest

from cri.spdy import (
    DEFAULT_INITIAL_WINDOW,
    MAX_WINDOW,
    DataFrame,
    FlowWindow,
    Frame,
    FrameDecoder,
    FrameEncoder,
    GoAway,
    GoAwayStatus,
    HeadersFrame,
    Limits,
    Ping,
    RstStatus,
    RstStream,
    Setting,
    SettingId,
    Settings,
    SpdyError,
    StreamState,
    SynReply,
    SynStream,
    WindowUpdate,
    header,
)
from cri.spdy_dictionary import HEADER_DICTIONARY

ALL_KINDS: list[Frame] = [
    SynStream(1, (("streamtype", "data"), ("port", "8080"), ("requestid", "0")), priority=3, fin=True),
    SynReply(1),
    HeadersFrame(1, (("x", "a\x00b"),), fin=True),
    DataFrame(1, b"hello", fin=True),
    DataFrame(3),
    RstStream(1, RstStatus.CANCEL),
    Settings((Setting(SettingId.INITIAL_WINDOW_SIZE, 1 << 20, 1),), clear=True),
    Ping(1),
    GoAway(7, GoAwayStatus.PROTOCOL_ERROR),
    WindowUpdate(0, 12345),
    WindowUpdate(5, MAX_WINDOW),
]


def test_the_dictionary_is_the_drafts() -> None:
    assert len(HEADER_DICTIONARY) == 1423 and zlib.adler32(HEADER_DICTIONARY) == 0xE3C6A7C2


def test_every_frame_type_round_trips_through_one_pair_of_contexts() -> None:
    encoder = FrameEncoder()
    wire = b"".join(encoder.encode(f) for f in ALL_KINDS)
    assert FrameDecoder().feed(wire) == ALL_KINDS


def test_header_lookup_is_case_insensitive_as_upstream_writes_streamType() -> None:
    assert header((("streamtype", "error"),), "streamType") == "error"
    assert header((), "port") is None


def test_unknown_control_frames_are_skipped() -> None:
    unknown = struct.pack(">HHI", 0x8003, 0x00FF, 4) + b"abcd"
    assert FrameDecoder().feed(unknown + FrameEncoder().encode(Ping(3))) == [Ping(3)]


def _syn_stream_with_block(block: bytes, stream_id: int = 1) -> bytes:
    body = struct.pack(">IIBB", stream_id, 0, 0, 0) + block
    return struct.pack(">HHI", 0x8003, 1, len(body)) + body


def _compress(raw: bytes) -> bytes:
    deflater = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS, zdict=HEADER_DICTIONARY)
    return deflater.compress(raw) + deflater.flush(zlib.Z_SYNC_FLUSH)


def _block(pairs: list[tuple[bytes, bytes]]) -> bytes:
    return struct.pack(">I", len(pairs)) + b"".join(
        struct.pack(">I", len(n)) + n + struct.pack(">I", len(v)) + v for n, v in pairs)


HOSTILE = {
    "giant data length": struct.pack(">II", 1, (1 << 24) - 1),
    "giant control length": struct.pack(">HHI", 0x8003, 1, (1 << 24) - 1),
    "version 2": struct.pack(">HHI", 0x8002, 6, 4) + b"\x00\x00\x00\x01",
    "zlib bomb": _syn_stream_with_block(_compress(_block([(b"a", b"x" * 200_000)]))),
    "too many headers": _syn_stream_with_block(_compress(_block([(b"h%d" % i, b"") for i in range(65)]))),
    "header count lies": _syn_stream_with_block(_compress(struct.pack(">I", 0xFFFFFFFF))),
    "uppercase name": _syn_stream_with_block(_compress(_block([(b"streamType", b"error")]))),
    "duplicate name": _syn_stream_with_block(_compress(_block([(b"port", b"1"), (b"port", b"2")]))),
    "not zlib": _syn_stream_with_block(b"\x00" * 16),
    "truncated block": _syn_stream_with_block(_compress(_block([(b"port", b"8080")]))[:12]),
    "stream 0": _syn_stream_with_block(_compress(_block([])), stream_id=0),
    "data on stream 0": struct.pack(">II", 0, 0),
    "short ping": struct.pack(">HHI", 0x8003, 6, 2) + b"\x00\x01",
    "rst status 0": struct.pack(">HHI", 0x8003, 3, 8) + struct.pack(">II", 1, 0),
    "window delta 0": struct.pack(">HHI", 0x8003, 9, 8) + struct.pack(">II", 1, 0),
    "settings count lies": struct.pack(">HHI", 0x8003, 4, 4) + struct.pack(">I", 1000),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_is_rejected_with_a_bounded_error(name: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(SpdyError) as err:
        decoder.feed(HOSTILE[name])
    assert len(str(err.value)) < 200
    assert decoder.buffered == 0
    with pytest.raises(SpdyError):  # poisoned: the zlib context may be out of step
        decoder.feed(FrameEncoder().encode(Ping(1)))


def test_a_giant_length_is_refused_before_its_payload_arrives() -> None:
    decoder = FrameDecoder(Limits(max_data_payload=1024))
    assert decoder.feed(struct.pack(">II", 1, 1024)) == []  # at the limit: waits for the payload
    with pytest.raises(SpdyError) as err:
        FrameDecoder(Limits(max_data_payload=1024)).feed(struct.pack(">II", 1, 1025))
    assert err.value.status is RstStatus.FRAME_TOO_LARGE


def test_the_decompressed_bound_holds_across_a_connection() -> None:
    """The bomb limit is per header block, with one context shared by all blocks."""
    encoder = FrameEncoder()
    decoder = FrameDecoder(Limits(max_header_block=100))
    small = SynStream(1, (("streamtype", "error"),))
    assert decoder.feed(encoder.encode(small)) == [small]
    with pytest.raises(SpdyError, match="inflates beyond 100"):
        decoder.feed(encoder.encode(SynStream(3, (("x", "y" * 200),))))


def test_encoder_refuses_what_the_wire_cannot_carry() -> None:
    encoder = FrameEncoder()
    with pytest.raises(ValueError):
        encoder.encode(SynStream(1, (("streamType", "error"),)))
    with pytest.raises(ValueError):
        encoder.encode(DataFrame(0, b""))
    with pytest.raises(ValueError):
        encoder.encode(WindowUpdate(1, 0))


def test_flow_window_spend_grow_and_settings_change() -> None:
    window = FlowWindow()
    assert window.size == DEFAULT_INITIAL_WINDOW == 65536
    window.spend(65536)
    assert window.size == 0
    window.grow(100)
    window.adjust_initial(65536, 1024)  # SETTINGS may push an open window below zero
    assert window.size == 100 - 64512
    with pytest.raises(SpdyError) as err:
        FlowWindow(MAX_WINDOW).grow(1)
    assert err.value.status is RstStatus.FLOW_CONTROL_ERROR


def test_stream_state_half_close_and_data_after_fin() -> None:
    state = StreamState(1)
    state.on_data(10, fin=False)
    assert state.recv_window.size == DEFAULT_INITIAL_WINDOW - 10
    state.on_data(0, fin=True)
    assert state.remote_closed and not state.closed
    with pytest.raises(SpdyError) as err:
        state.on_data(1, fin=False)
    assert err.value.status is RstStatus.STREAM_ALREADY_CLOSED and err.value.stream_id == 1
    state.on_local_fin()
    assert state.closed
    with pytest.raises(SpdyError):
        state.on_local_fin()
    reset = StreamState(3)
    reset.on_reset()
    assert reset.closed
