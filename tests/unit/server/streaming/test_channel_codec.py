"""The WebSocket channel protocols against the recorded v5.channel.k8s.io messages, and their rules."""

from __future__ import annotations

import pytest

from minikubelet.server.streaming import channel_codec as cc
from minikubelet.server.streaming.channel_codec import ChannelClosed, ChannelData, ChannelError, PortForwardLayout
from tests.unit.server.streaming.recorded import WS_SCENARIOS, load, recorded_data


@pytest.mark.parametrize("scenario", WS_SCENARIOS)
def test_recorded_messages_decode_and_encode_back(scenario: str) -> None:
    rec = load(scenario)
    protocol = rec.connection["subprotocol"]
    assert protocol == cc.V5_BINARY
    seen = 0
    for message in rec.connection["frames"]:
        if message["opcode"] != 2:
            continue
        if message["channel"] == cc.CLOSE_SIGNAL:
            wire = bytes((255, message["closes_channel"]))
            assert cc.decode(protocol, wire, 5) == ChannelClosed(message["closes_channel"])
            assert cc.encode_close(protocol, message["closes_channel"]) == wire
        else:
            data, length = recorded_data(message)
            assert length == message["payload_len"] - 1
            if data is None:
                continue
            encoded = cc.encode(protocol, message["channel"], data)
            assert encoded == bytes((message["channel"],)) + data
            assert cc.decode(protocol, encoded, 5) == ChannelData(message["channel"], data)
        seen += 1
    assert seen


def test_the_server_speaks_first_with_an_empty_stdout_message() -> None:
    first = load("exec-echo-ws").connection["frames"][0]
    assert (first["dir"], first["channel"], first["payload_len"]) == ("s2c", cc.Channel.STDOUT, 1)


def test_exit_status_and_resize_travel_on_channels_3_and_4() -> None:
    rec = load("exec-exit3-ws")
    status = [m for m in rec.connection["frames"] if m.get("channel") == cc.Channel.ERROR]
    assert b'"NonZeroExitCode"' in (recorded_data(status[0])[0] or b"")
    resize = [m for m in load("exec-tty-resize-ws").connection["frames"] if m.get("channel") == cc.Channel.RESIZE]
    assert [recorded_data(m)[0] for m in resize] == [b'{"Width":80,"Height":24}\n', b'{"Width":120,"Height":40}\n']


def test_base64_protocols_use_a_digit_and_text() -> None:
    assert cc.encode(cc.V4_BASE64, 1, b"hi") == "1aGk="
    assert cc.decode(cc.V4_BASE64, "1aGk=", 5) == ChannelData(1, b"hi")
    with pytest.raises(ChannelError):
        cc.decode(cc.V4_BASE64, "1a!", 5)


def test_close_signal_is_v5_only_and_checked() -> None:
    assert cc.decode(cc.V4_BINARY, b"\xff\x00", 256) == ChannelData(255, b"\x00")
    with pytest.raises(ChannelError):
        cc.encode_close(cc.V4_BINARY, 0)
    for bad in (b"\xff", b"\xff\x00\x00", b"\xff\x09"):
        with pytest.raises(ChannelError):
            cc.decode(cc.V5_BINARY, bad, 5)


def test_empty_messages_are_skipped_and_unknown_channels_refused() -> None:
    assert cc.decode(cc.V5_BINARY, b"", 5) is None
    with pytest.raises(ChannelError):
        cc.decode(cc.V5_BINARY, b"\x05x", 5)


def test_negotiation_takes_the_clients_first_supported_protocol() -> None:
    assert cc.negotiate(["v6.channel.k8s.io", cc.V4_BINARY, cc.V5_BINARY], cc.REMOTECOMMAND_PROTOCOLS) == cc.V4_BINARY
    assert cc.negotiate([cc.PORTFORWARD_TUNNEL], cc.PORTFORWARD_PROTOCOLS) == cc.PORTFORWARD_TUNNEL
    assert cc.negotiate(["bogus"], cc.REMOTECOMMAND_PROTOCOLS) is None
    assert cc.is_tunnel(load("portforward-ws").connection["subprotocol"])


def test_port_forward_channel_layout() -> None:
    layout = PortForwardLayout(cc.parse_ports(["8080,9090", "53"]))
    assert layout.ports == (8080, 9090, 53) and layout.channels == 6
    assert (layout.data_channel(1), layout.error_channel(1)) == (2, 3)
    assert layout.port_of(3) == 9090 and layout.is_data(4) and not layout.is_data(5)
    assert PortForwardLayout.port_prefix(8080) == b"\x90\x1f"
    for bad in ([], [""], ["0"], ["65536"], ["http"]):
        with pytest.raises(ChannelError):
            cc.parse_ports(bad)
