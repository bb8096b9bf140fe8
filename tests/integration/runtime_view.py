"""The containers as the agent's runtime holds them, whichever it is (`MKL_TEST_RUNTIME`): read through our own
`cri.runtime.Runtime` for it (`cri/docker` on the test engine, `cri/remote` on the CRI containerd), so an agent
test checks state, exec and logs the same way on both. A test that needs a Docker-only thing (its events, its
json-file log driver) says so with `docker_only`."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from cri.docker import DockerRuntime
from cri.errors import NotFoundError
from cri.remote import RemoteRuntime
from cri.runtime import Runtime
from cri.types import ContainerState, ContainerStatus, ExecResult, SandboxState
from tests.integration import agent_env

POD_UID_LABEL = "io.kubernetes.pod.uid"
POD_NAME_LABEL = "io.kubernetes.pod.name"


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
        """A container id without its runtime prefix (which, when there is one, must be this runtime's)."""
        if "://" not in status_id:
            return status_id
        assert status_id.startswith(self.prefix), f"{status_id!r} is not a {self.name} container id"
        return status_id.removeprefix(self.prefix)

    async def status(self, container_id: str) -> ContainerStatus:
        return await self.runtime.container_status(self.bare(container_id))

    async def running(self, container_id: str) -> bool:
        return (await self.status(container_id)).state is ContainerState.RUNNING

    async def exists(self, container_id: str) -> bool:
        try:
            await self.status(container_id)
        except NotFoundError:
            return False
        return True

    async def kill(self, container_id: str) -> None:
        """SIGKILL the container behind the agent's back (a stop with timeout 0)."""
        await self.runtime.stop_container(self.bare(container_id), timeout=0)

    async def exec(self, container_id: str, *cmd: str, timeout: float = 10.0) -> ExecResult:
        return await self.runtime.exec_sync(self.bare(container_id), list(cmd), timeout)

    async def logs(self, container_id: str) -> bytes:
        return await self.runtime.container_logs(self.bare(container_id))

    async def containers_of(self, pod_uid: str) -> list[ContainerStatus]:
        return await self.runtime.list_containers({POD_UID_LABEL: pod_uid})

    async def pod_objects(self, labels: Mapping[str, str]) -> list[PodObject]:
        """Every sandbox and container carrying these labels, whatever their state (what `docker ps -a` with
        label filters shows)."""
        sandboxes = await self.runtime.list_pod_sandboxes(labels)
        containers = await self.runtime.list_containers(labels)
        return ([PodObject(s.id, "sandbox", s.state is SandboxState.READY, s.labels) for s in sandboxes]
                + [PodObject(c.id, "container", c.state is ContainerState.RUNNING, c.labels) for c in containers])

    async def objects_of(self, pod_uid: str, *, running: bool = False) -> list[PodObject]:
        """A pod's sandboxes and containers (only the running ones with `running`)."""
        found = await self.pod_objects({POD_UID_LABEL: pod_uid})
        return [o for o in found if o.running] if running else found

    async def pod_gateway(self) -> str:
        """The address the pods' network routes through on this node, where a pod reaches a server of the test:
        Docker's default bridge, or the CNI bridge the test environment's conflist configures."""
        if self.name == "docker":
            return await _docker_bridge_address()
        return await _cni_bridge_address()

    async def objects_of_node(self, node: str) -> list[PodObject]:
        """The sandboxes and containers of every pod whose name ends in `-<node>` (static pods of that node)."""
        return [o for o in await self.pod_objects({}) if o.labels.get(POD_NAME_LABEL, "").endswith(f"-{node}")]


async def _ip(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec("ip", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"ip {' '.join(args)}: exit {proc.returncode}: {err.decode().strip()}"
    return out.decode()


async def _docker_bridge_address() -> str:
    async with aiodocker.Docker(url=agent_env.docker_host()) as d:
        info: dict[str, Any] = await (await d.networks.get("bridge")).show()
    device = info["Options"].get("com.docker.network.bridge.name", "docker0")
    return str(json.loads(await _ip("-4", "-j", "addr", "show", "dev", device))[0]["addr_info"][0]["local"])


async def _cni_bridge_address() -> str:
    """The CNI bridge plugin creates the bridge with the first pod; a test may need the address before that, so
    the bridge is made here as the plugin would make it (it adopts an existing bridge of that name)."""
    conflist = Path(f"/run/{os.environ.get('MKL_TEST_NETNS', 'mkltest')}/cri/net.d/10-mkl-pods.conflist")
    bridge = next(p for p in json.loads(conflist.read_text())["plugins"] if p["type"] == "bridge")
    subnet = ipaddress.ip_network(bridge["ipam"]["ranges"][0][0]["subnet"])
    gateway = f"{next(subnet.hosts())}/{subnet.prefixlen}"
    name = bridge["bridge"]
    # not /sys/class/net: that sysfs is the host's, this process only entered the netns
    if f": {name}: " not in await _ip("-o", "link", "show"):
        await _ip("link", "add", name, "type", "bridge")
    if f" {gateway} " not in await _ip("-4", "-o", "addr", "show", "dev", name):
        await _ip("addr", "add", gateway, "dev", name)
    await _ip("link", "set", name, "up")
    return str(next(subnet.hosts()))


@dataclass(frozen=True)
class PodObject:
    """A pod's sandbox or container as the runtime lists it."""

    id: str
    kind: str  # "sandbox" or "container"
    running: bool  # a READY sandbox, a RUNNING container
    labels: dict[str, str]


@dataclass(frozen=True)
class Exit:
    container_id: str
    exit_code: int
    finished_at: float  # the runtime's wall-clock time of the exit
    logs: bytes  # the container's log as it was when the exit was seen (before the agent removes it)


class ExitWatch:
    """The exits of some containers, as the runtime records them: their status is polled every `interval` from
    now on, so the exit code, the runtime's own exit time and the log are caught before the agent removes the
    container (Docker's `die` events, on any runtime)."""

    def __init__(self, view: RuntimeView, *container_ids: str, interval: float = 0.05) -> None:
        self._view = view
        self._ids = [c.split("://", 1)[-1] for c in container_ids]
        self._interval = interval
        self._exits: dict[str, Exit] = {}
        self._task = asyncio.create_task(self._poll(), name="exit-watch")

    async def all(self, timeout: float) -> list[Exit]:
        """Every watched container's exit, in the order they exited."""
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return sorted(self._exits.values(), key=lambda e: e.finished_at)

    async def _poll(self) -> None:
        while len(self._exits) < len(self._ids):
            for cid in self._ids:
                if cid in self._exits:
                    continue
                try:
                    status = await self._view.status(cid)
                except NotFoundError as exc:
                    raise AssertionError(f"container {cid} was removed before its exit was seen") from exc
                if status.state is ContainerState.EXITED:
                    logs = b""
                    with contextlib.suppress(NotFoundError):
                        logs = await self._view.logs(cid)
                    self._exits[cid] = Exit(cid, status.exit_code, status.finished_at, logs)
            await asyncio.sleep(self._interval)


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
