"""Port-forward on a CRI runtime: `PortForward` returns a URL of the runtime's streaming server, spoken to here as
SPDY/3.1 with `portforward.k8s.io`, as kubectl and the kubelet's streaming proxy speak it: an HTTP upgrade, then
per forwarded connection an `error` stream (half-closed at once: only the runtime writes on it) and a `data`
stream, both with `port` and `requestID`. The runtime dials `localhost:<port>` in the sandbox's network namespace
when the data stream arrives; a failure comes back as text on the error stream (already upstream's whole
`error forwarding port ...` message), then both streams end.

The agent's side of the connection is an ordinary asyncio stream pair over a socketpair, so the kubelet API pipes
it like Docker's in-namespace socket; the runtime's error text is kept on the reader (`ForwardReader.error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl

from cri.remote.streaming import CONNECT_TIMEOUT, upgrade
from cri.spdy import DataFrame, FrameDecoder, FrameEncoder, Ping, RstStream, SpdyError, SynStream
from cri.streaming import ForwardReader, PortForwardError

PROTOCOL = "portforward.k8s.io"
ERROR_STREAM = 1
DATA_STREAM = 3
MAX_DATA_FRAME = 32 * 1024
ERROR_WAIT = 5.0  # seconds the error stream may stay open after the data stream ended


class _Pump:
    """Copies between the runtime's SPDY data stream and our end of the socketpair."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, local: socket.socket,
                 forward_reader: ForwardReader) -> None:
        self._reader = reader
        self._writer = writer
        self._local = local
        self._forward_reader = forward_reader
        self._encoder = FrameEncoder()
        self._decoder = FrameDecoder()
        self._lock = asyncio.Lock()  # header blocks must reach the zlib context in wire order

    async def send(self, frame: DataFrame | SynStream | Ping) -> None:
        async with self._lock:
            self._writer.write(self._encoder.encode(frame))
            await self._writer.drain()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        upstream = asyncio.create_task(self._to_runtime(loop))
        try:
            await self._from_runtime(loop)
            # The runtime ended the data stream: what we still send has nowhere to go (containerd closes the pod
            # connection within 1 s of either direction ending).
            await asyncio.wait_for(asyncio.shield(upstream), 1.0)
        except (TimeoutError, ConnectionError, OSError, ssl.SSLError, SpdyError):
            pass
        finally:
            upstream.cancel()
            await asyncio.gather(upstream, return_exceptions=True)
            self._local.close()
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
                await self._writer.wait_closed()

    async def _to_runtime(self, loop: asyncio.AbstractEventLoop) -> None:
        with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
            while data := await loop.sock_recv(self._local, MAX_DATA_FRAME):
                await self.send(DataFrame(DATA_STREAM, data))
            await self.send(DataFrame(DATA_STREAM, b"", fin=True))

    async def _from_runtime(self, loop: asyncio.AbstractEventLoop) -> None:
        data_open = error_open = True
        try:
            while data_open or error_open:
                # containerd closes the data stream before it writes the error: after the data stream's end, the
                # error stream is read until the runtime ends it too (briefly: it does so at once).
                read = self._reader.read(65536)
                chunk = await (read if data_open else asyncio.wait_for(read, ERROR_WAIT))
                if not chunk:
                    return
                for frame in self._decoder.feed(chunk):
                    match frame:
                        case DataFrame(stream_id, data, fin) if stream_id == DATA_STREAM:
                            if data and data_open:
                                await loop.sock_sendall(self._local, data)
                            data_open = data_open and not fin
                        case DataFrame(stream_id, data, fin) if stream_id == ERROR_STREAM:
                            self._forward_reader.error += data.decode(errors="replace")
                            error_open = error_open and not fin
                        case RstStream(stream_id) if stream_id == DATA_STREAM:
                            data_open = False
                        case RstStream(stream_id) if stream_id == ERROR_STREAM:
                            error_open = False
                        case Ping(ping_id) if ping_id % 2 == 0:
                            await self.send(frame)
                        case _:
                            pass
        finally:
            # The error text (if any) is complete before the agent's side reads EOF.
            with contextlib.suppress(OSError):
                self._local.shutdown(socket.SHUT_WR)


async def forward(url: str, port: int) -> tuple[ForwardReader, asyncio.StreamWriter]:
    """One connection to `port` through the runtime's streaming URL. Raises PortForwardError when the streaming
    server cannot be reached or refuses."""
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            reader, writer = await upgrade(url, PROTOCOL)
    except Exception as exc:  # any failure to reach the streaming server is this forward's error
        raise PortForwardError(f"cannot connect to the runtime's streaming server: {exc}") from exc
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    forward_reader = ForwardReader()
    transport, protocol = await loop.create_connection(
        lambda: asyncio.StreamReaderProtocol(forward_reader), sock=ours)
    agent_writer = asyncio.StreamWriter(transport, protocol, forward_reader, loop)
    pump = _Pump(reader, writer, theirs, forward_reader)
    headers = (("port", str(port)), ("requestid", "0"))
    try:
        await pump.send(SynStream(ERROR_STREAM, (("streamtype", "error"), *headers), fin=True))
        await pump.send(SynStream(DATA_STREAM, (("streamtype", "data"), *headers)))
    except (ConnectionError, OSError, ssl.SSLError) as exc:
        agent_writer.close()
        theirs.close()
        writer.close()
        raise PortForwardError(f"the runtime's streaming server dropped the connection: {exc}") from exc
    task = asyncio.create_task(pump.run(), name="cri-port-forward")
    forward_reader.pump = task  # held by the reader: the copy runs as long as the agent's side is in use
    return forward_reader, agent_writer
