"""Port-forward's pure rules (headers, pairing, texts) against the recorded SPDY frames, and the SPDY side end to
end over a socket pair: the recorded client frames in, a stand-in for the pod's httpd behind `connect`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from cri.spdy import DataFrame, FrameDecoder, Headers, RstStatus, SynStream
from cri.streaming import PortForwardError
from minikubelet.server.auth import Attributes, User, forbidden_message, request_attributes
from minikubelet.server.port_forward import (
    PairError,
    PairTable,
    StreamPair,
    Target,
    forward_error,
    parse_port,
    request_id,
    serve_spdy_port_forward,
    stream_rejection,
)
from minikubelet.server.streaming.connection import ConnectionOptions, SpdyConnection
from tests.spdy_tunnel_client import ClientStream, SpdyClient
from tests.unit.server.streaming.recorded import load

RECORDED = load("portforward-spdy")


def recorded_client_frames() -> list[SynStream | DataFrame]:
    raw = RECORDED.after_head("c2s")
    frames = FrameDecoder().feed(raw)
    assert all(isinstance(f, SynStream | DataFrame) for f in frames)
    return [f for f in frames if isinstance(f, SynStream | DataFrame)]


def recorded_server_data() -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for frame in FrameDecoder().feed(RECORDED.after_head("s2c")):
        if isinstance(frame, DataFrame):
            out[frame.stream_id] = out.get(frame.stream_id, b"") + frame.data
    return out


# -- headers, ids, pairs, texts ------------------------------------------------------------------------------

def test_recorded_streams_pair_by_request_id() -> None:
    syns = [f for f in recorded_client_frames() if isinstance(f, SynStream)]
    assert [stream_rejection(f.headers) for f in syns] == [None] * 4
    table: PairTable[int] = PairTable()
    complete = {}
    for syn in syns:
        rid = request_id(syn.stream_id, syn.headers)
        pair, _ = table.get(rid)
        if pair.add(str(dict(syn.headers)["streamtype"]), syn.stream_id):
            complete[rid] = (pair.error, pair.data)
            table.remove(rid)
    assert complete == {"0": (1, 5), "1": (3, 7)}
    assert len(table) == 0


@pytest.mark.parametrize(("headers", "reason"), [
    ((("streamtype", "data"),), '"port" header is required'),
    ((("port", ""), ("streamtype", "data")), '"port" header is required'),
    ((("port", "http"), ("streamtype", "data")),
     'unable to parse "http" as a port: strconv.ParseUint: parsing "http": invalid syntax'),
    ((("port", "-1"), ("streamtype", "data")),
     'unable to parse "-1" as a port: strconv.ParseUint: parsing "-1": invalid syntax'),
    ((("port", "65536"), ("streamtype", "data")),
     'unable to parse "65536" as a port: strconv.ParseUint: parsing "65536": value out of range'),
    ((("port", "0"), ("streamtype", "data")), 'port "0" must be > 0'),
    ((("port", "80"),), '"streamType" header is required'),
    ((("port", "80"), ("streamtype", "stdin")), 'invalid stream type "stdin"'),
    ((("port", "65535"), ("streamtype", "error")), None),
])
def test_stream_rejection_texts(headers: Headers, reason: str | None) -> None:
    assert stream_rejection(headers) == reason


def test_parse_port_rejects_non_ascii_digits() -> None:
    assert isinstance(parse_port("٨٠"), str)
    assert parse_port("8080") == 8080


def test_request_id_without_header_follows_stream_ids() -> None:
    assert request_id(5, (("streamtype", "error"), ("port", "80"))) == "5"
    assert request_id(7, (("streamtype", "data"), ("port", "80"))) == "5"
    assert request_id(9, (("streamtype", "data"), ("port", "80"), ("requestid", "x"))) == "x"


def test_a_second_stream_of_a_kind_is_an_error() -> None:
    pair: StreamPair[int] = StreamPair("0")
    assert pair.add("error", 1) is False
    with pytest.raises(PairError, match=r"^error stream already assigned$"):
        pair.add("error", 3)
    assert pair.add("data", 5) is True
    with pytest.raises(PairError, match=r"^data stream already assigned$"):
        pair.add("data", 7)


def test_forward_error_text() -> None:
    assert forward_error(8081, "3f2a", "", "failed") == "error forwarding port 8081 to pod 3f2a, uid : failed"


# -- SPDY end to end over a socket pair --------------------------------------------------------------------

@dataclass
class Pod:
    """What `connect` reaches: a one-request HTTP server answering with the recorded responses, or refusals."""

    refused: frozenset[int] = frozenset()
    connections: int = 0

    async def connect(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if port in self.refused:
            raise PortForwardError(f"failed to connect to localhost:{port} inside namespace \"sb\"")
        self.connections += 1
        ours, theirs = socket.socketpair()
        served = asyncio.create_task(self._serve(theirs))
        reader, writer = await asyncio.open_connection(sock=ours)
        self._tasks.append(served)
        return reader, writer

    def __post_init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    async def _serve(self, sock: socket.socket) -> None:
        reader, writer = await asyncio.open_connection(sock=sock)
        request = await reader.readuntil(b"\r\n\r\n")
        responses = recorded_server_data()
        writer.write(responses[7] if request.startswith(b"GET / ") else responses[5])
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@pytest.fixture
async def served() -> AsyncIterator[tuple[SpdyClient, Pod, list[SpdyConnection]]]:
    pod = Pod(refused=frozenset({9}))
    server_sock, client_sock = socket.socketpair()
    s_reader, s_writer = await asyncio.open_connection(sock=server_sock)
    conn = SpdyConnection(s_reader, s_writer, ConnectionOptions(), reject=stream_rejection)
    server = asyncio.create_task(serve_spdy_port_forward(conn, Target(pod.connect, "sb", creation_timeout=0.2, grace=0.1)))
    c_reader, c_writer = await asyncio.open_connection(sock=client_sock)
    client = SpdyClient(c_reader, c_writer)
    reading = asyncio.create_task(client.run())
    try:
        yield client, pod, [conn]
    finally:
        c_writer.close()
        await asyncio.wait_for(server, 5)
        await reading
        await pod.stop()


async def test_recorded_client_frames_get_the_recorded_answers(
        served: tuple[SpdyClient, Pod, list[SpdyConnection]]) -> None:
    client, pod, _ = served
    for frame in recorded_client_frames():
        if isinstance(frame, SynStream):
            stream = await client.open(frame.headers)
            assert stream.id == frame.stream_id
        else:
            await client.send(frame)
    streams = client.streams
    for sid in (1, 3, 5, 7):
        await streams[sid].read_all()
    expected = recorded_server_data()
    assert {sid: bytes(s.received) for sid, s in streams.items() if s.received} == {5: expected[5], 7: expected[7]}
    assert all(s.replied.is_set() and s.remote_fin and s.reset is None for s in streams.values())
    assert pod.connections == 2
    assert [e for e in client.events if e[0] == "reply"] == [("reply", 1), ("reply", 3), ("reply", 5), ("reply", 7)]
    fins = [sid for kind, sid in client.events if kind == "fin"]
    assert sorted(fins) == [1, 3, 5, 7] and fins.index(5) < fins.index(1) and fins.index(7) < fins.index(3)


async def test_refused_port_writes_the_error_and_spares_the_others(
        served: tuple[SpdyClient, Pod, list[SpdyConnection]]) -> None:
    client, _, _ = served
    bad_err = await client.open((("streamtype", "error"), ("port", "9"), ("requestid", "0")))
    await bad_err.close()
    good_err = await client.open((("streamtype", "error"), ("port", "8080"), ("requestid", "1")))
    await good_err.close()
    bad_data = await client.open((("streamtype", "data"), ("port", "9"), ("requestid", "0")))
    good_data = await client.open((("streamtype", "data"), ("port", "8080"), ("requestid", "1")))
    await good_data.write(b"GET / HTTP/1.1\r\n\r\n")
    assert await bad_err.read_all() == (b'error forwarding port 9 to pod sb, uid : failed to connect to localhost:9 '
                                        b'inside namespace "sb"')
    assert (bad_err.reset, (await bad_data.read_all(), bad_data.reset)) == (RstStatus.CANCEL, (b"", RstStatus.CANCEL))
    assert (await good_data.read_all()).endswith(b"hello from busybox httpd\n")
    assert good_data.remote_fin and (await good_err.read_all(), good_err.remote_fin) == (b"", True)


async def test_bad_headers_are_reset_without_a_reply(served: tuple[SpdyClient, Pod, list[SpdyConnection]]) -> None:
    client, _, _ = served
    stream = await client.open((("streamtype", "data"), ("port", "http")))
    await stream.read_all()
    assert (stream.replied.is_set(), stream.reset) == (False, RstStatus.CANCEL)


async def test_duplicate_and_unpaired_streams(served: tuple[SpdyClient, Pod, list[SpdyConnection]]) -> None:
    client, _, [conn] = served
    err = await client.open((("streamtype", "error"), ("port", "80"), ("requestid", "7")))
    dup: ClientStream = await client.open((("streamtype", "error"), ("port", "80"), ("requestid", "7")))
    assert await dup.read_all() == b"" and dup.reset is RstStatus.CANCEL
    text = (await err.read_all(timeout=5)).decode()
    # the duplicate's complaint, then the pair times out (no data stream came within the creation timeout)
    assert text == (f"error processing stream for request 7: error stream already assigned"
                    f"(conn={id(conn):#x}, request=7) timed out waiting for streams")
    assert err.reset is RstStatus.CANCEL


def test_port_forward_is_authorized_as_nodes_proxy() -> None:
    user = User("system:kube-apiserver")
    assert request_attributes(user, "POST", "/portForward/ns/web", "node-1") == [
        Attributes(user, "create", "proxy", "node-1")]
    assert [a.verb for a in request_attributes(user, "GET", "/portForward/ns/web/uid", "node-1")] == ["get"]
    assert forbidden_message(request_attributes(User("bob"), "POST", "/portForward/ns/web", "n")) == (
        "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[proxy])\n")


async def test_finished_forwards_free_their_streams_even_if_the_client_never_closes() -> None:
    pod = Pod()
    server_sock, client_sock = socket.socketpair()
    s_reader, s_writer = await asyncio.open_connection(sock=server_sock)
    conn = SpdyConnection(s_reader, s_writer, ConnectionOptions(max_streams=4), reject=stream_rejection)
    server = asyncio.create_task(serve_spdy_port_forward(conn, Target(pod.connect, "sb", grace=0.01)))
    c_reader, c_writer = await asyncio.open_connection(sock=client_sock)
    client = SpdyClient(c_reader, c_writer)
    reading = asyncio.create_task(client.run())
    try:
        for rid in range(6):  # three times what four stream slots hold
            headers = (("port", "8080"), ("requestid", str(rid)))
            error = await client.open((("streamtype", "error"), *headers))  # never FINed by this client
            data = await client.open((("streamtype", "data"), *headers))
            await data.write(b"GET / HTTP/1.1\r\n\r\n")
            assert (await data.read_all()).endswith(b"hello from busybox httpd\n"), rid
            assert (await error.read_all(), error.remote_fin, data.reset) == (b"", True, None)
    finally:
        c_writer.close()
        await asyncio.wait_for(server, 5)
        await reading
        await pod.stop()
