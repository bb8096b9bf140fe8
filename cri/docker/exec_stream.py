"""Interactive exec on Docker: `POST /exec/{id}/start` hijacks the HTTP connection into a raw stream
(multiplexed stdout/stderr frames without a tty, plain bytes with one), which aiodocker's `Stream` wraps."""

from __future__ import annotations

import asyncio

from aiodocker.execs import Exec
from aiodocker.stream import Stream

from cri.docker.client import DockerClient, translate_errors
from cri.docker.exec import _exit_code
from cri.streaming import STDERR, STDOUT

HIJACK_TIMEOUT = 30.0  # the hijack itself; output then flows unbounded


class HijackedSession:
    """The stdio half of a hijacked Docker connection (exec or attach); resizing is per kind."""

    def __init__(self, stream: Stream, stdin: bool) -> None:
        self._stream = stream
        self._stdin_closed = not stdin  # without stdin attached, Docker never reads what we would write

    async def read(self) -> tuple[int, bytes] | None:
        with translate_errors():
            message = await self._stream.read_out()
        if message is None:
            return None
        return (STDERR if message.stream == STDERR else STDOUT), bytes(message.data)

    async def write(self, data: bytes) -> None:
        if data and not self._stdin_closed:
            await self._stream.write_in(data)

    async def close_stdin(self) -> None:
        if self._stdin_closed:
            return
        self._stdin_closed = True
        # Half-close only: aiodocker's Stream.close() also drops the response, i.e. the output still to come.
        resp = self._stream._resp
        transport = resp.connection.transport if resp is not None and resp.connection is not None else None
        if transport is not None and transport.can_write_eof():
            transport.write_eof()

    async def close(self) -> None:
        await self._stream.close()


async def hijack(stream: Stream) -> None:
    with translate_errors():
        await asyncio.wait_for(stream._init(), timeout=HIJACK_TIMEOUT)


class DockerExecSession(HijackedSession):
    def __init__(self, exec_: Exec, stream: Stream, stdin: bool) -> None:
        super().__init__(stream, stdin)
        self._exec = exec_

    async def resize(self, width: int, height: int) -> None:
        with translate_errors():
            await self._exec.resize(h=height, w=width)

    async def exit_code(self) -> int:
        with translate_errors():
            return await _exit_code(self._exec)


async def exec_stream(client: DockerClient, container_id: str, cmd: list[str], *, stdin: bool, stdout: bool,
                      stderr: bool, tty: bool) -> DockerExecSession:
    created = await client.post(
        f"containers/{container_id}/exec",
        {"Cmd": cmd, "AttachStdin": stdin, "AttachStdout": stdout, "AttachStderr": stderr, "Tty": tty},
    )
    exec_ = Exec(client.raw, str(created["Id"]), tty=tty)
    stream = exec_.start(detach=False)
    await hijack(stream)
    return DockerExecSession(exec_, stream, stdin)
