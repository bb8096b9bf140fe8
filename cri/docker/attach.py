"""Attach on Docker: `POST /containers/{id}/attach?stream=1` hijacks the HTTP connection into the container's
own stdio (multiplexed stdout/stderr frames, or one raw stream when the container was created with a tty).

Closing stdin half-closes the connection: Docker then closes the container's stdin when it was created with
`StdinOnce` (as `stdinOnce: true` asks), and otherwise ends this attachment's output.
"""

from __future__ import annotations

from aiodocker.stream import Stream

from cri.docker.client import DockerClient, translate_errors
from cri.docker.exec_stream import HijackedSession, hijack


class DockerAttachSession(HijackedSession):
    def __init__(self, client: DockerClient, container_id: str, stream: Stream, stdin: bool) -> None:
        super().__init__(stream, stdin)
        self._client = client
        self._id = container_id

    async def resize(self, width: int, height: int) -> None:
        await self._client.post(f"containers/{self._id}/resize", None, params={"h": height, "w": width})


async def attach_stream(client: DockerClient, container_id: str, *, stdin: bool, stdout: bool, stderr: bool,
                        tty: bool) -> DockerAttachSession:
    """`tty` is implied by the container (aiodocker reads its config to know whether output is multiplexed)."""
    with translate_errors():
        container = await client.raw.containers.get(container_id)
    stream = container.attach(stdin=stdin, stdout=stdout, stderr=stderr and not tty, logs=False)
    await hijack(stream)
    return DockerAttachSession(client, container_id, stream, stdin)
