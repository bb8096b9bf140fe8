"""Interactive exec and attach on a CRI runtime: `Exec`/`Attach` return a URL of the runtime's streaming server,
spoken to here as a WebSocket with the Kubernetes channel protocol (one leading byte per frame: 0 stdin,
1 stdout, 2 stderr, 3 the final status, 4 terminal resize; 255 closes a channel, v5 only)."""

from __future__ import annotations

import json

import aiohttp

from cri.errors import RuntimeError_
from cri.streaming import STDERR, STDOUT

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
CONNECT_TIMEOUT = 30.0
_STDIN, _ERROR, _RESIZE, _CLOSE = 0, 3, 4, 255


def exit_code_of(status: bytes) -> int:
    """The exit code in the streaming server's final status (a metav1.Status); -1 when it names none."""
    if not status:
        return -1
    try:
        parsed = json.loads(status)
    except ValueError:
        return -1
    if parsed.get("status") == "Success":
        return 0
    if parsed.get("reason") == "NonZeroExitCode":
        for cause in (parsed.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                try:
                    return int(cause.get("message", ""))
                except ValueError:
                    return -1
    return -1


class ChannelSession:
    """One exec or attach on the runtime's streaming server."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse, stdin: bool) -> None:
        self._session = session
        self._ws = ws
        self._stdin_open = stdin
        self._status = b""
        self._ended = False

    async def read(self) -> tuple[int, bytes] | None:
        while not self._ended:
            message = await self._ws.receive()
            if message.type is aiohttp.WSMsgType.BINARY:
                data = bytes(message.data)
                if len(data) < 2:
                    continue  # the server's empty frame that opens each channel
                channel, payload = data[0], data[1:]
                if channel in (STDOUT, STDERR):
                    return channel, payload
                if channel == _ERROR:
                    self._status += payload
                continue
            if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED,
                                aiohttp.WSMsgType.ERROR):
                self._ended = True
        return None

    async def write(self, data: bytes) -> None:
        if data and self._stdin_open:
            await self._ws.send_bytes(bytes([_STDIN]) + data)

    async def close_stdin(self) -> None:
        # v4 has no way to end stdin alone; v5 closes the channel. Either way nothing more is sent.
        if self._stdin_open and self._ws.protocol == PROTOCOLS[0]:
            await self._ws.send_bytes(bytes([_CLOSE, _STDIN]))
        self._stdin_open = False

    async def resize(self, width: int, height: int) -> None:
        await self._ws.send_bytes(bytes([_RESIZE]) + json.dumps({"Width": width, "Height": height}).encode())

    async def exit_code(self) -> int:
        while await self.read() is not None:
            pass
        return exit_code_of(self._status)

    async def close(self) -> None:
        await self._ws.close()
        await self._session.close()


async def open_stream(url: str, stdin: bool) -> ChannelSession:
    session = aiohttp.ClientSession()
    try:
        ws = await session.ws_connect(url, protocols=PROTOCOLS, timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
                                      max_msg_size=0)
    except (aiohttp.ClientError, TimeoutError) as exc:
        await session.close()
        raise RuntimeError_(f"cannot connect to the runtime's streaming server at {url}: {exc}") from exc
    except BaseException:
        await session.close()
        raise
    return ChannelSession(session, ws, stdin)
