"""Optional runtime capabilities: interactive exec, attach and port-forward (CRI `Exec`/`Attach`/`PortForward`,
served by the runtime's streaming server in CRI).

`cri.runtime.Runtime` stays as it is; a runtime that can hand out a live exec session implements
`StreamingRuntime` too, one that can attach to a container's own streams `AttachingRuntime`, and the kubelet
API checks for them (`isinstance`) before offering /exec and /attach.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

STDOUT = 1
STDERR = 2


class StreamSession(Protocol):
    """Live streams of a process (an exec'd one, or a container's main process): stdin in, output out."""

    async def read(self) -> tuple[int, bytes] | None:
        """The next output chunk as (STDOUT|STDERR, data); None at the end of the output."""

    async def write(self, data: bytes) -> None:
        """Bytes for the process's stdin."""

    async def close_stdin(self) -> None:
        """End of stdin (the process reads EOF); output keeps flowing."""

    async def resize(self, width: int, height: int) -> None:
        """The terminal size, for tty sessions."""

    async def close(self) -> None:
        """Drop the connection to the process (it may keep running, as with the CRI)."""


class ExecSession(StreamSession, Protocol):
    """One running exec process; it also has an exit code."""

    async def exit_code(self) -> int:
        """After the output ended: the exit code (-1 when the runtime does not know it)."""


@runtime_checkable
class StreamingRuntime(Protocol):
    async def exec_stream(self, container_id: str, cmd: list[str], *, stdin: bool, stdout: bool, stderr: bool,
                          tty: bool) -> ExecSession:
        """Start cmd in the container with the given streams attached. Raises NotFoundError."""


@runtime_checkable
class AttachingRuntime(Protocol):
    async def attach_stream(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool,
                            tty: bool) -> StreamSession:
        """Attach to the running container's own stdio. `tty` is how the container was created (its output is
        then one raw stream). Raises NotFoundError, or RuntimeError_ when the runtime
        refuses (a container that is not running)."""
class ForwardReader(asyncio.StreamReader):
    """The pod side of a forwarded connection whose failure can come after it opened (a CRI runtime's streaming
    server dials the port only once the streams exist): `error` holds the runtime's text, complete at EOF."""

    def __init__(self) -> None:
        super().__init__()
        self.error = ""
        self.pump: asyncio.Task[None] | None = None


class PortForwardError(Exception):
    """The runtime could not connect to the port inside the pod; the text goes to the client's error stream."""


@runtime_checkable
class PortForwardRuntime(Protocol):
    """CRI `PortForward`, the runtime side: a TCP connection to `localhost:<port>` in the sandbox's network
    namespace. A CRI runtime would instead hand out its streaming URL for the kubelet to proxy."""

    async def port_forward(self, sandbox_id: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The connected stream. Raises PortForwardError (refused, no such sandbox, not running)."""
