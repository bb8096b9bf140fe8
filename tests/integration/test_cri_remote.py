"""What RemoteRuntime does beyond the shared contract, against the test environment's CRI containerd 1.6:
the pod network (CNI bridge, hostPort through portmap, DNS), CRI log files, exec timeouts, resources, stats,
port-forward into the sandbox, images and the runtime's own status."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from cri.conditions import condition_errors
from cri.errors import NotFoundError
from cri.remote import RemoteRuntime
from cri.remote.streaming import SpdySession
from cri.remote.task_exits import task_exits
from cri.streaming import STDERR, STDOUT, ForwardReader, PortForwardError
from cri.types import (
    ContainerConfig,
    ContainerEventType,
    ContainerMeta,
    ContainerState,
    DNSConfig,
    LinuxResources,
    PodMeta,
    PodSandboxConfig,
    PortMapping,
    SandboxState,
)
from tests.images import BUSYBOX_IMAGE, PAUSE_IMAGE
from tests.integration import cri_runtime
from tests.integration.cri_runtime import RUN_LABEL

pytestmark = pytest.mark.integration
remote_runtime = cri_runtime.remote_runtime
cri_endpoint = cri_runtime.cri_endpoint


def pod(rt: RemoteRuntime, name: str, **fields: object) -> PodSandboxConfig:
    config = PodSandboxConfig(PodMeta(name, "default", str(uuid.uuid4())), hostname=name,
                              labels={RUN_LABEL: rt.test_run})  # type: ignore[attr-defined]
    return replace(config, **fields)  # type: ignore[arg-type]


def shell(name: str, script: str, **fields: object) -> ContainerConfig:
    config = ContainerConfig(ContainerMeta(name), BUSYBOX_IMAGE, command=("sh", "-c", script))
    return replace(config, **fields)  # type: ignore[arg-type]


async def started(rt: RemoteRuntime, sandbox: PodSandboxConfig, config: ContainerConfig) -> tuple[str, str]:
    sandbox_id = await rt.run_pod_sandbox(sandbox)
    container_id = await rt.create_container(sandbox_id, config, sandbox)
    await rt.start_container(container_id)
    return sandbox_id, container_id


async def http_get(url: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    return await resp.text()
            except (aiohttp.ClientError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)


async def test_pod_network_dns_host_port_and_port_forward(remote_runtime: RemoteRuntime, tmp_path: Path) -> None:
    rt = remote_runtime
    host_port = 30000 + os.getpid() % 20000
    web = pod(rt, "web", dns=DNSConfig(("10.96.0.10",), ("default.svc.cluster.local",), ("ndots:5",)),
              port_mappings=(PortMapping(80, "TCP", host_port),))
    serve = "mkdir -p /www && echo hello-from-cri >/www/index.html && exec httpd -f -p 80 -h /www"
    sandbox_id, container_id = await started(rt, web, shell("httpd", serve))

    status = await rt.pod_sandbox_status(sandbox_id)
    assert status.state is SandboxState.READY and status.ip.startswith("10.88.")  # the testenv CNI bridge
    assert status.network_namespace and os.path.exists(status.network_namespace)
    # The pod IP is routed from the netns the tests run in, the hostPort goes through portmap.
    assert (await http_get(f"http://{status.ip}/")).strip() == "hello-from-cri"
    assert (await http_get(f"http://127.0.0.1:{host_port}/")).strip() == "hello-from-cri"
    resolv = await rt.exec_sync(container_id, ["cat", "/etc/resolv.conf"], 5.0)
    assert resolv.exit_code == 0
    assert resolv.stdout.decode().split("\n")[:3] == [
        "search default.svc.cluster.local", "nameserver 10.96.0.10", "options ndots:5"]
    hostname = await rt.exec_sync(container_id, ["hostname"], 5.0)
    assert hostname.stdout.strip() == b"web"

    reader, writer = await rt.port_forward(sandbox_id, 80)
    writer.write(b"GET / HTTP/1.0\r\n\r\n")
    await writer.drain()
    assert b"hello-from-cri" in await asyncio.wait_for(reader.read(), 10.0)
    writer.close()
    # Through the runtime's streaming URL the refusal comes after the connection opened, on the error stream.
    reader, writer = await rt.port_forward(sandbox_id, 81)
    assert await asyncio.wait_for(reader.read(), 10.0) == b""
    assert isinstance(reader, ForwardReader)
    assert reader.error.startswith(f"error forwarding port 81 to pod {sandbox_id}, uid : ")
    assert "connection refused" in reader.error
    writer.close()
    await rt.stop_pod_sandbox(sandbox_id)
    with pytest.raises(PortForwardError, match="not running"):
        await rt.port_forward(sandbox_id, 80)


async def test_logs_are_cri_log_files(remote_runtime: RemoteRuntime, tmp_path: Path) -> None:
    rt = remote_runtime
    logs = tmp_path / "pod-logs"
    logs.mkdir()
    sandbox = pod(rt, "logs", log_directory=str(logs))
    # The two streams are separate pipes: the pause keeps their order in the file fixed.
    script = "echo out-1; echo err-1 >&2; sleep 0.3; printf no-newline; echo; echo out-2; exit 3"
    sandbox_id, container_id = await started(rt, sandbox, shell("app", script, log_path="app/0.log"))
    for _ in range(100):
        status = await rt.container_status(container_id)
        if status.state is ContainerState.EXITED:
            break
        await asyncio.sleep(0.1)
    assert (status.exit_code, status.reason, status.log_path) == (3, "Error", str(logs / "app/0.log"))
    raw = (logs / "app" / "0.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in raw if "err-1" in line] == ["stderr F err-1"]
    assert sorted((await rt.container_logs(container_id)).decode().splitlines()[:2]) == ["err-1", "out-1"]
    assert (await rt.container_logs(container_id)).decode().splitlines()[2:] == ["no-newline", "out-2"]
    assert await rt.container_logs(container_id, tail=1) == b"out-2\n"

    # After the kubelet moved a running container's file away, ReopenContainerLog makes the runtime start a new one.
    ticker = await rt.create_container(sandbox_id, shell("ticker", "while true; do echo tick; sleep 0.1; done",
                                                         log_path="ticker/0.log"), sandbox)
    await rt.start_container(ticker)
    current = logs / "ticker" / "0.log"
    await asyncio.sleep(0.5)
    os.rename(current, logs / "ticker" / "0.log.1")
    await rt.reopen_container_log(ticker)
    for _ in range(50):
        if current.exists() and "stdout F tick" in current.read_text():
            break
        await asyncio.sleep(0.1)
    assert "stdout F tick" in current.read_text()


async def test_exec_timeout_resources_and_stats(remote_runtime: RemoteRuntime) -> None:
    rt = remote_runtime
    sandbox = pod(rt, "busy", cgroup_parent="")
    _, container_id = await started(rt, sandbox, shell("app", "while true; do sleep 0.1; done",
                                                       resources=LinuxResources(memory_limit_bytes=64 << 20)))
    start = time.monotonic()
    result = await rt.exec_sync(container_id, ["sleep", "30"], 1.0)
    assert result.timed_out and time.monotonic() - start < 8
    ok = await rt.exec_sync(container_id, ["sh", "-c", "echo a; echo b >&2; exit 4"], 5.0)
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.timed_out) == (4, b"a\n", b"b\n", False)

    status = await rt.container_status(container_id)
    cgroup = Path(f"/proc/{status.pid}/cgroup").read_text()
    memory_path = next(line.split(":", 2)[2] for line in cgroup.splitlines() if ":memory:" in line)
    limit = Path("/sys/fs/cgroup/memory") / memory_path.lstrip("/") / "memory.limit_in_bytes"
    assert int(limit.read_text()) == 64 << 20
    await rt.update_container_resources(container_id, LinuxResources(memory_limit_bytes=96 << 20))
    assert int(limit.read_text()) == 96 << 20

    stats = await rt.container_stats(container_id)
    assert stats.container_id == container_id and stats.memory_usage_bytes > 0
    assert stats.cpu_usage_core_nanoseconds > 0 and abs(stats.timestamp - time.time()) < 60


async def test_images_status_config_and_conditions(remote_runtime: RemoteRuntime) -> None:
    rt = remote_runtime
    version = await rt.version()
    assert (version.runtime_name, version.runtime_api_version) == ("containerd", "v1")
    assert version.container_id_scheme == "containerd://"
    assert (await rt.runtime_config()).cgroup_driver == "cgroupfs"  # from the 1.6 verbose Status
    assert condition_errors(await rt.status()) == (True, (), ())

    busybox = await rt.image_status(BUSYBOX_IMAGE)
    assert busybox is not None and busybox.id.startswith("sha256:") and BUSYBOX_IMAGE in busybox.repo_tags
    assert busybox.size > 0
    assert {PAUSE_IMAGE, BUSYBOX_IMAGE} <= {tag for image in await rt.list_images() for tag in image.repo_tags}
    assert await rt.image_status("minikubelet.test/absent:0") is None
    await rt.remove_image("minikubelet.test/absent:0")  # gone is done
    filesystems = await rt.image_fs_info()
    assert filesystems and all(used > 0 for _, used, _ in filesystems)
    with pytest.raises(NotFoundError):
        await rt.container_stats("0" * 64)


async def test_exec_and_attach_through_the_streaming_server(remote_runtime: RemoteRuntime) -> None:
    rt = remote_runtime
    sandbox = pod(rt, "shell")
    cat = shell("cat", "cat", stdin=True)  # echoes its stdin: something to attach to
    _, container_id = await started(rt, sandbox, cat)

    async def output(session: SpdySession) -> list[tuple[int, bytes]]:
        chunks = []
        while (chunk := await session.read()) is not None:
            chunks.append(chunk)
        return chunks

    session = await rt.exec_stream(container_id, ["sh", "-c", "echo out; echo err >&2; exit 7"], stdin=False,
                                   stdout=True, stderr=True, tty=False)
    try:
        got = await asyncio.wait_for(output(session), 10)
        assert sorted(got) == [(STDOUT, b"out\n"), (STDERR, b"err\n")]
        assert await session.exit_code() == 7
    finally:
        await session.close()

    session = await rt.exec_stream(container_id, ["sh"], stdin=True, stdout=True, stderr=True, tty=False)
    try:
        await session.write(b"echo from-stdin; exit 0\n")
        assert await asyncio.wait_for(session.read(), 10) == (STDOUT, b"from-stdin\n")
        assert await asyncio.wait_for(session.exit_code(), 10) == 0
    finally:
        await session.close()

    attached = await rt.attach_stream(container_id, stdin=True, stdout=True, stderr=True, tty=False)
    try:
        await attached.write(b"ping\n")
        assert await asyncio.wait_for(attached.read(), 10) == (STDOUT, b"ping\n")
    finally:
        await attached.close()
    with pytest.raises(NotFoundError):
        await rt.exec_stream("0" * 64, ["true"], stdin=False, stdout=True, stderr=True, tty=False)


async def test_containerd_task_exits_bring_the_relist_forward(remote_runtime: RemoteRuntime) -> None:
    """containerd 1.6 has no CRI event stream: with a 60 s relist period the exit of a container that ends by
    itself is reported within seconds only because containerd's event service said so (task_exits), and an
    exec's exit is not a container's."""
    rt = remote_runtime
    sandbox_id, cid = await started(rt, pod(rt, "exits"), shell("c", "sleep 3; exit 3"))
    exits: list[str] = []

    async def read_exits() -> None:
        async for container_id in task_exits(rt._channel):
            exits.append(container_id)

    reader = asyncio.create_task(read_exits())
    slow = RemoteRuntime(rt.endpoint, events_relist_period=60.0)
    await slow.connect()

    async def stopped() -> None:
        async for event in slow.events():
            if event.container_id == cid and event.type is ContainerEventType.STOPPED:
                return

    watcher = asyncio.create_task(stopped())
    try:
        await asyncio.sleep(0.5)  # both subscriptions open before anything exits
        assert (await rt.exec_sync(cid, ["true"], 10)).exit_code == 0
        started_at = time.monotonic()
        await asyncio.wait_for(watcher, 30)
        assert time.monotonic() - started_at < 20, "the exit waited for the 60 s relist"
        assert (await rt.container_status(cid)).exit_code == 3
        for _ in range(100):
            if exits:
                break
            await asyncio.sleep(0.05)
        assert exits == [cid]  # the exec's exit was not reported as the container's
    finally:
        for task in (reader, watcher):
            task.cancel()
        await asyncio.gather(reader, watcher, return_exceptions=True)
        await slow.close()
        await rt.stop_pod_sandbox(sandbox_id)
