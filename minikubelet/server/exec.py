"""`/exec/{ns}/{pod}/{container}` and `/attach/...` (upstream `cri/streaming/remotecommand`): a runtime stream
session (an exec'd process, or the container's own stdio) bridged to SPDY/3.1 streams or WebSocket channels.

Both transports carry the same thing: stdin in, stdout and stderr out, resize events in, and at the end the
status on the error stream/channel (v4+: a Status JSON; for exec `NonZeroExitCode` with the code as cause
`ExitCode`, for attach always Success unless attaching failed). Each session runs in the request's own task, so
a long stream never holds up anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from cri.spdy import RstStatus
from cri.streaming import STDERR, ExecSession, StreamSession
from minikubelet.server.streaming.channel_codec import Channel, ChannelClosed, ChannelData, supports_close
from minikubelet.server.streaming.channels import ChannelWebSocket
from minikubelet.server.streaming.connection import SpdyConnection, SpdyStream
from minikubelet.server.streaming.negotiation import REMOTECOMMAND_V1, REMOTECOMMAND_V2, REMOTECOMMAND_V3

log = logging.getLogger("minikubelet.server.exec")

STREAM_CREATION_TIMEOUT = 30.0  # upstream streamCreationTimeout default
MAX_RESIZE_LINE = 1024


@dataclass(frozen=True)
class ExecOptions:
    command: tuple[str, ...]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def exec_options(query: dict[str, list[str]], command_required: bool = True) -> ExecOptions | str:
    """Upstream `NewOptions`: the flags as `1`/`true`; an error text when no stream or no command was asked."""
    def flag(*names: str) -> bool:
        return any((query.get(n) or [""])[0] in ("1", "true", "True") for n in names)

    opts = ExecOptions(tuple(query.get("command", [])), flag("input", "stdin"), flag("output", "stdout"),
                       flag("error", "stderr"), flag("tty"))
    if command_required and not opts.command:
        return "you must specify at least 1 command"
    if not (opts.stdin or opts.stdout or opts.stderr):
        return "you must specify at least 1 of stdin, stdout, stderr"
    if opts.tty and opts.stderr:
        opts = ExecOptions(opts.command, opts.stdin, opts.stdout, False, True)  # a tty merges stderr into stdout
    return opts


_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _go_json(value: object) -> bytes:
    """JSON as Go's encoding/json writes it: compact, UTF-8, and `<`, `>`, `&`, U+2028/9 escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return "".join(_GO_ESCAPES.get(ch, ch) for ch in text).encode()


def exit_status(code: int, command: tuple[str, ...], websocket: bool = False) -> bytes:
    """The Status for an ended exec. The wording is per transport, as recorded: over SPDY the CRI streaming
    server's (it names the command), over WebSocket the 1.36 kubelet's translator's."""
    if code == 0:
        status: dict[str, object] = {"metadata": {}, "status": "Success"}
    else:
        cause = (f"command terminated with exit code {code}" if websocket
                 else f"error executing command [{' '.join(command)}], exit code {code}")
        status = {
            "metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: {cause}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    return _go_json(status)


def error_status(message: str) -> bytes:
    """apimachinery's `NewInternalError`, as the streaming server writes it when the runtime call failed."""
    return _go_json({"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
                     "reason": "InternalError", "details": {"causes": [{"message": message}]}, "code": 500})


S = TypeVar("S", bound=StreamSession)


@dataclass(frozen=True)
class Remote(Generic[S]):
    """What a stream request runs: `start` opens the runtime session, `exit_code` reads its outcome once the
    output ended, `failure` prefixes a start error (upstream's wording per endpoint)."""

    start: Callable[[], Awaitable[S]]
    exit_code: Callable[[S], Awaitable[int]]
    failure: str


async def _exec_exit_code(session: ExecSession) -> int:
    return await session.exit_code()


async def _attached(session: StreamSession) -> int:
    return 0  # attach reports Success whatever the container's own exit code


def exec_remote(start: Callable[[], Awaitable[ExecSession]]) -> Remote[ExecSession]:
    return Remote(start, _exec_exit_code, "error executing command in container")


def attach_remote(start: Callable[[], Awaitable[StreamSession]]) -> Remote[StreamSession]:
    return Remote(start, _attached, "error attaching to container")


def _resize(line: bytes) -> tuple[int, int] | None:
    try:
        size = json.loads(line)
        return int(size["Width"]), int(size["Height"])
    except (ValueError, KeyError, TypeError):
        return None


Output = Callable[[int, bytes], Awaitable[None]]


async def pump_output(session: StreamSession, out: Output) -> None:
    while (chunk := await session.read()) is not None:
        await out(*chunk)


# -- SPDY -----------------------------------------------------------------------------------------------------

async def _expected_streams(conn: SpdyConnection, opts: ExecOptions) -> dict[str, SpdyStream]:
    wanted = {"error"} | {n for n, on in (("stdin", opts.stdin), ("stdout", opts.stdout),
                                          ("stderr", opts.stderr), ("resize", opts.tty)) if on}
    streams: dict[str, SpdyStream] = {}
    async with asyncio.timeout(STREAM_CREATION_TIMEOUT):
        while not wanted <= set(streams):
            stream = await conn.accept()
            if stream is None:
                raise ConnectionError("connection closed before the streams were set up")
            kind = stream.header("streamtype") or ""
            if kind in streams or kind not in {"error", "stdin", "stdout", "stderr", "resize"}:
                await stream.reset(RstStatus.PROTOCOL_ERROR)
                continue
            streams[kind] = stream
    return streams


async def serve_spdy_exec(conn: SpdyConnection, protocol: str, opts: ExecOptions, remote: Remote[S]) -> None:
    runner = asyncio.create_task(conn.run(), name="spdy-exec-reader")
    try:
        try:
            streams = await _expected_streams(conn, opts)
        except (TimeoutError, ConnectionError) as exc:
            log.info("exec streams not set up: %s", exc)
            return
        error = streams["error"]
        try:
            session = await remote.start()
        except Exception as exc:
            message = f"{remote.failure}: {str(exc)[:512]}"
            with contextlib.suppress(ConnectionError, OSError):
                await error.write(error_status(message) if protocol not in _PLAIN_ERRORS else message.encode())
            return
        try:
            await _run_spdy(session, remote, streams, protocol, opts)
        finally:
            await session.close()
        with contextlib.suppress(ConnectionError, OSError):
            for kind in ("error", "stdin", "resize"):
                if kind in streams:
                    await streams[kind].reset(RstStatus.CANCEL)
            await conn.close()
    finally:
        if not conn.closed:
            await conn.close()
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


_PLAIN_ERRORS = {REMOTECOMMAND_V1, REMOTECOMMAND_V2, REMOTECOMMAND_V3}  # only v4+ put a Status on the error stream


async def _run_spdy(session: S, remote: Remote[S], streams: dict[str, SpdyStream], protocol: str,
                    opts: ExecOptions) -> None:
    async def out(kind: int, data: bytes) -> None:
        target = streams.get("stderr" if kind == STDERR and "stderr" in streams else "stdout")
        if target is not None and data:
            await target.write(data)

    helpers = []
    if "stdin" in streams:
        helpers.append(asyncio.create_task(_spdy_stdin(streams["stdin"], session)))
    if "resize" in streams:
        helpers.append(asyncio.create_task(_spdy_resize(streams["resize"], session)))
    try:
        with contextlib.suppress(ConnectionError, OSError):
            await pump_output(session, out)
        code = await remote.exit_code(session)
        with contextlib.suppress(ConnectionError, OSError):
            for kind in ("stdout", "stderr"):
                if kind in streams:
                    await streams[kind].close()
            if protocol in _PLAIN_ERRORS:
                if code != 0:
                    await streams["error"].write(f"command terminated with non-zero exit code: {code}".encode())
            else:
                await streams["error"].write(exit_status(code, opts.command))
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)


async def _spdy_stdin(stream: SpdyStream, session: StreamSession) -> None:
    while data := await stream.read():
        await session.write(data)
    await session.close_stdin()


async def _spdy_resize(stream: SpdyStream, session: StreamSession) -> None:
    pending = b""
    while data := await stream.read():
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if (size := _resize(line)) is not None:
                await session.resize(*size)
        if len(pending) > MAX_RESIZE_LINE:
            return


# -- WebSocket ------------------------------------------------------------------------------------------------

def first_channel(stdout: bool, stderr: bool) -> Channel:
    """Where upstream's server says the streams are up: stdout if asked for, else stderr, else the error channel."""
    return Channel.STDOUT if stdout else Channel.STDERR if stderr else Channel.ERROR


async def serve_websocket_exec(ws: ChannelWebSocket, opts: ExecOptions, remote: Remote[S]) -> None:
    # Upstream's handshake write, recorded first in every session: an empty message on the lowest writable channel.
    await ws.send(first_channel(opts.stdout, opts.stderr), b"")
    try:
        session = await remote.start()
    except Exception as exc:
        await ws.send(Channel.ERROR, error_status(f"{remote.failure}: {str(exc)[:512]}"))
        await ws.close()
        return

    async def out(kind: int, data: bytes) -> None:
        if data:
            await ws.send(Channel.STDERR if kind == STDERR and opts.stderr else Channel.STDOUT, data)

    reader = asyncio.create_task(_ws_input(ws, session, opts))
    try:
        with contextlib.suppress(ConnectionError, OSError):
            await pump_output(session, out)
        code = await remote.exit_code(session)
        with contextlib.suppress(ConnectionError, OSError):
            await ws.send(Channel.ERROR, exit_status(code, opts.command, websocket=True))
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await session.close()
    await ws.close()


async def _ws_input(ws: ChannelWebSocket, session: StreamSession, opts: ExecOptions) -> None:
    pending = b""
    while (msg := await ws.receive()) is not None:
        if isinstance(msg, ChannelClosed):
            if msg.channel == Channel.STDIN:
                await session.close_stdin()
        elif isinstance(msg, ChannelData):
            if msg.channel == Channel.STDIN and opts.stdin:
                await session.write(msg.data)
            elif msg.channel == Channel.RESIZE and opts.tty:
                pending += msg.data
                *lines, pending = pending.split(b"\n")
                for line in [*lines, pending] if pending.endswith(b"}") else lines:
                    if (size := _resize(line)) is not None:
                        await session.resize(*size)
                if pending.endswith(b"}"):
                    pending = b""
                pending = pending[-MAX_RESIZE_LINE:]
    if opts.stdin and not supports_close(ws.protocol):
        await session.close_stdin()
