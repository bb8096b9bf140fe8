"""Attach on Docker: `POST /containers/{id}/attach?stream=1` hijacks the HTTP connection into the container's
own stdio (multiplexed stdout/stderr frames, or one raw stream when the container was created with a tty).

Closing stdin half-closes the connection: Docker then closes the container's stdin when it was created with
`StdinOnce` (as `stdinOnce: true` asks), and otherwise ends this attachment's output.
"""

from __future__ import annotations

from cri.docker.client import DockerClient, Params
from cri.docker.exec_stream import HijackedSession, hijack
from cri.docker.hijack import RawStream


class DockerAttachSession(HijackedSession):
    def __init__(self, client: DockerClient, container_id: str, stream: RawStream, stdin: bool) -> None:
        super().__init__(stream, stdin)
        self._client = client
        self._id = container_id

    async def resize(self, width: int, height: int) -> None:
        await self._client.post(f"containers/{self._id}/resize", None, params={"h": height, "w": width})


async def attach_stream(client: DockerClient, container_id: str, *, stdin: bool, stdout: bool, stderr: bool,
                        tty: bool) -> DockerAttachSession:
    """Whether output is multiplexed is the container's own tty setting, read from its inspect."""
    container = await client.get(f"containers/{container_id}/json")
    tty = bool((container.get("Config") or {}).get("Tty"))
    params: Params = {"detachKeys": "", "logs": False, "stdin": stdin, "stdout": stdout, "stderr": stderr and not tty,
              "stream": True}
    stream = await hijack(client, f"containers/{container_id}/attach", params=params, tty=tty)
    return DockerAttachSession(client, container_id, stream, stdin)
