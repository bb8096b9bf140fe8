"""The containers as the agent's runtime holds them, whichever it is (`MKL_TEST_RUNTIME`): read through our own
`cri.runtime.Runtime` for it (`cri/docker` on the test engine, `cri/remote` on the CRI containerd), so an agent
test checks state, exec and logs the same way on both. A test that needs a Docker-only thing (its events, its
json-file log driver) says so with `docker_only`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cri.docker import DockerRuntime
from cri.errors import NotFoundError
from cri.remote import RemoteRuntime
from cri.runtime import Runtime
from cri.types import ContainerState, ContainerStatus, ExecResult
from tests.integration import agent_env

POD_UID_LABEL = "io.kubernetes.pod.uid"


def docker_only(reason: str) -> pytest.MarkDecorator:
    """Skip on containerd with the reason (listed in docs/containerd.md)."""
    return pytest.mark.skipif(agent_env.agent_runtime() != "docker", reason=f"Docker-only: {reason}")


class RuntimeView:
    def __init__(self, name: str, runtime: Runtime) -> None:
        self.name = name
        self.runtime = runtime

    @property
    def prefix(self) -> str:
        """How status names this runtime's container ids: `docker://` or `containerd://`."""
        return f"{self.name}://"

    def bare(self, status_id: str) -> str:
        """A status containerID without its runtime prefix."""
        assert status_id.startswith(self.prefix), f"{status_id!r} is not a {self.name} container id"
        return status_id.removeprefix(self.prefix)

    async def status(self, container_id: str) -> ContainerStatus:
        return await self.runtime.container_status(self.bare(container_id) if "://" in container_id
                                                   else container_id)

    async def running(self, container_id: str) -> bool:
        return (await self.status(container_id)).state is ContainerState.RUNNING

    async def exists(self, container_id: str) -> bool:
        try:
            await self.status(container_id)
        except NotFoundError:
            return False
        return True

    async def exec(self, container_id: str, *cmd: str, timeout: float = 10.0) -> ExecResult:
        cid = self.bare(container_id) if "://" in container_id else container_id
        return await self.runtime.exec_sync(cid, list(cmd), timeout)

    async def logs(self, container_id: str) -> bytes:
        cid = self.bare(container_id) if "://" in container_id else container_id
        return await self.runtime.container_logs(cid)

    async def containers_of(self, pod_uid: str) -> list[ContainerStatus]:
        return await self.runtime.list_containers({POD_UID_LABEL: pod_uid})


async def open_view() -> RuntimeView:
    name = agent_env.agent_runtime()
    runtime: Runtime
    if name == "docker":
        docker = DockerRuntime(agent_env.docker_host())
        await docker.connect()
        runtime = docker
    else:
        runtime = RemoteRuntime(agent_env.runtime_endpoint(""))
    return RuntimeView(name, runtime)


@pytest.fixture
async def runtime_view() -> AsyncIterator[RuntimeView]:
    view = await open_view()
    try:
        yield view
    finally:
        await view.runtime.close()
