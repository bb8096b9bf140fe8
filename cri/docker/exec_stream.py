"""Interactive exec on Docker: `POST /exec/{id}/start` hijacks the HTTP connection into a raw stream
(multiplexed stdout/stderr frames without a tty, plain bytes with one), read by `cri.docker.hijack.RawStream`."""

from __future__ import annotations

import asyncio
from typing import Any

from cri.docker.client import DockerClient, Params, translate_errors
from cri.docker.exec import exit_code
from cri.docker.hijack import RawStream

HIJACK_TIMEOUT = 30.0  # the hijack itself; output then flows unbounded


class HijackedSession:
    """The stdio half of a hijacked Docker connection (exec or attach); resizing is per kind."""

    def __init__(self, stream: RawStream, stdin: bool) -> None:
        self._stream = stream
        self._stdin_closed = not stdin  # without stdin attached, Docker never reads what we would write

    async def read(self) -> tuple[int, bytes] | None:
        with translate_errors():
            return await self._stream.read()

    async def write(self, data: bytes) -> None:
        if data and not self._stdin_closed:
            with translate_errors():
                await self._stream.write(data)

    async def close_stdin(self) -> None:
        if self._stdin_closed:
            return
        self._stdin_closed = True
        # Half-close only: the output still to come keeps flowing.
        self._stream.write_eof()

    async def close(self) -> None:
        await self._stream.close()


async def hijack(client: DockerClient, path: str, body: Any = None, params: Params | None = None, *,
                 tty: bool) -> RawStream:
    return await asyncio.wait_for(client.hijack(path, body, params, tty=tty), timeout=HIJACK_TIMEOUT)


class DockerExecSession(HijackedSession):
    def __init__(self, client: DockerClient, exec_id: str, stream: RawStream, stdin: bool) -> None:
        super().__init__(stream, stdin)
        self._client = client
        self._id = exec_id

    async def resize(self, width: int, height: int) -> None:
        await self._client.post(f"exec/{self._id}/resize", params={"h": height, "w": width})

    async def exit_code(self) -> int:
        return await exit_code(self._client, self._id)


async def exec_stream(client: DockerClient, container_id: str, cmd: list[str], *, stdin: bool, stdout: bool,
                      stderr: bool, tty: bool) -> DockerExecSession:
    created = await client.post(
        f"containers/{container_id}/exec",
        {"Cmd": cmd, "AttachStdin": stdin, "AttachStdout": stdout, "AttachStderr": stderr, "Tty": tty},
    )
    exec_id = str(created["Id"])
    stream = await hijack(client, f"exec/{exec_id}/start", {"Detach": False, "Tty": tty}, tty=tty)
    return DockerExecSession(client, exec_id, stream, stdin)
