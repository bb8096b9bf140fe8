"""DockerRuntime against a real dockerd (socket from MKL_TEST_DOCKER_HOST, pytest inside its netns)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import tarfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from cri.docker import DockerRuntime
from cri.errors import ImagePullError, NotFoundError
from cri.types import (
    LABEL_POD_UID,
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerMeta,
    ContainerState,
    ContainerStatus,
    DNSConfig,
    LinuxResources,
    PodMeta,
    PodSandboxConfig,
    PortMapping,
    SandboxState,
)
from tests.images import PAUSE_IMAGE
from tests.integration import cri_runtime
from tests.integration.cri_runtime import RUN_LABEL

pytestmark = pytest.mark.integration

BUSYBOX = "minikubelet.test/busybox:1.36"
PAUSE = PAUSE_IMAGE
runtime = cri_runtime.runtime


def pod_config(rt: DockerRuntime, name: str = "web", **overrides: object) -> PodSandboxConfig:
    uid = str(uuid.uuid4())
    fields: dict[str, object] = {
        "metadata": PodMeta(name=name, namespace="default", uid=uid, attempt=0),
        "hostname": name,
        "labels": {RUN_LABEL: rt.test_run, LABEL_POD_UID: uid},  # type: ignore[attr-defined]
        "annotations": {"kubernetes.io/config.source": "file"},
        "dns": DNSConfig(servers=("10.96.0.10",), searches=("default.svc.cluster.local",), options=("ndots:5",)),
    }
    fields.update(overrides)
    return PodSandboxConfig(**fields)  # type: ignore[arg-type]


def container(name: str, script: str = "", **overrides: object) -> ContainerConfig:
    fields: dict[str, object] = {"metadata": ContainerMeta(name=name), "image": BUSYBOX}
    if script:
        fields["command"] = ("sh", "-c", script)
    fields.update(overrides)
    return ContainerConfig(**fields)  # type: ignore[arg-type]


async def run_container(rt: DockerRuntime, sandbox_id: str, pod: PodSandboxConfig, config: ContainerConfig) -> str:
    container_id = await rt.create_container(sandbox_id, config, pod)
    await rt.start_container(container_id)
    return container_id


async def poll_until(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if await check():
                return
            await asyncio.sleep(0.05)


async def wait_exited(rt: DockerRuntime, container_id: str, timeout: float = 20.0) -> ContainerStatus:
    async with asyncio.timeout(timeout):
        while True:
            status = await rt.container_status(container_id)
            if status.state is ContainerState.EXITED:
                return status
            await asyncio.sleep(0.05)


async def test_sandbox_and_containers_share_network(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime, port_mappings=(PortMapping(container_port=8080, host_port=18080),))
    sandbox_id = await runtime.run_pod_sandbox(pod)
    status = await runtime.pod_sandbox_status(sandbox_id)
    assert status.state is SandboxState.READY
    assert status.metadata == pod.metadata
    assert status.ip.count(".") == 3
    assert os.path.exists(status.network_namespace)
    assert status.labels[RUN_LABEL] == runtime.test_run  # type: ignore[attr-defined]
    assert status.annotations == {"kubernetes.io/config.source": "file"}

    server = container("server", "mkdir -p /www && echo hello-pod > /www/index.html && exec httpd -f -p 8080 -h /www")
    await run_container(runtime, sandbox_id, pod, server)
    client = container(
        "client",
        "for i in $(seq 100); do wget -qO- http://127.0.0.1:8080/ && hostname && exec cat /etc/resolv.conf; "
        "sleep 0.1; done; exit 1",
    )
    client_id = await run_container(runtime, sandbox_id, pod, client)
    finished = await wait_exited(runtime, client_id)
    assert finished.exit_code == 0, await runtime.container_logs(client_id)
    logs = await runtime.container_logs(client_id)
    assert b"hello-pod\nweb\n" in logs
    assert b"nameserver 10.96.0.10" in logs and b"ndots:5" in logs

    # The pod IP answers from the test's network namespace too.
    async with aiohttp.ClientSession() as session:
        for url in (f"http://{status.ip}:8080/", "http://127.0.0.1:18080/"):
            async with session.get(url) as resp:
                assert (await resp.text()).strip() == "hello-pod", url


async def test_run_pod_sandbox_and_create_are_idempotent(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    assert await runtime.run_pod_sandbox(pod) == sandbox_id
    racing = pod_config(runtime, name="race")
    first_id, second_id = await asyncio.gather(runtime.run_pod_sandbox(racing), runtime.run_pod_sandbox(racing))
    assert first_id == second_id
    config = container("app", "sleep 1000", labels={"k": "v"})
    first = await runtime.create_container(sandbox_id, config, pod)
    assert await runtime.create_container(sandbox_id, config, pod) == first
    assert len(await runtime.list_containers({LABEL_POD_UID: pod.metadata.uid})) == 1
    # A new attempt is a new container.
    retry = container("app", "sleep 1000", labels={"k": "v"}, metadata=ContainerMeta("app", 1))
    assert await runtime.create_container(sandbox_id, retry, pod) != first


async def test_stop_honours_sigterm_and_kills_after_timeout(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    polite = await run_container(runtime, sandbox_id, pod, container(
        "polite", "trap 'exit 143' TERM; touch /tmp/trapped; while true; do sleep 0.1; done"))
    stubborn = await run_container(runtime, sandbox_id, pod, container(
        "stubborn", "trap '' TERM; touch /tmp/trapped; while true; do sleep 0.1; done"))
    for cid in (polite, stubborn):  # the shells' traps are in place (a fixed pause was too short under load)
        for _ in range(200):
            if (await runtime.exec_sync(cid, ["test", "-e", "/tmp/trapped"], 5.0)).exit_code == 0:
                break
            await asyncio.sleep(0.05)

    async def timed_stop(container_id: str, timeout: float) -> float:
        start = time.monotonic()
        await runtime.stop_container(container_id, timeout)
        return time.monotonic() - start

    polite_time, stubborn_time = await asyncio.gather(timed_stop(polite, 10.0), timed_stop(stubborn, 2.0))
    assert polite_time < 2.0
    assert 1.9 <= stubborn_time < 4.0
    assert (await runtime.container_status(polite)).exit_code == 143
    killed = await runtime.container_status(stubborn)
    assert (killed.state, killed.exit_code, killed.reason) == (ContainerState.EXITED, 137, "Error")
    # Stopping again, or stopping something gone, is not an error.
    await runtime.stop_container(polite, 1.0)
    await runtime.stop_container("0" * 64, 1.0)


async def test_stop_uses_given_signal_then_configured_stop_signal(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    script = "trap 'exit 10' USR1; trap 'exit 12' USR2; while true; do sleep 0.1; done"
    explicit = await run_container(runtime, sandbox_id, pod, container("explicit", script))
    configured = await run_container(runtime, sandbox_id, pod, container("conf", script, stop_signal="SIGUSR2"))
    await asyncio.sleep(0.5)
    await asyncio.gather(
        runtime.stop_container(explicit, 5.0, signal="SIGUSR1"), runtime.stop_container(configured, 5.0)
    )
    assert (await runtime.container_status(explicit)).exit_code == 10
    assert (await runtime.container_status(configured)).exit_code == 12


async def test_exec_sync_output_exit_code_and_timeout(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    app = await run_container(runtime, sandbox_id, pod, container("app", "sleep 1000"))

    result = await runtime.exec_sync(app, ["sh", "-c", "echo out; echo err >&2; exit 3"], 5.0)
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (3, b"out\n", b"err\n", False)

    start = time.monotonic()
    hanging = asyncio.create_task(runtime.exec_sync(app, ["sleep", "77"], 1.0))
    quick = await runtime.exec_sync(app, ["echo", "hi"], 5.0)
    quick_time = time.monotonic() - start
    slow = await hanging
    slow_time = time.monotonic() - start
    assert quick.stdout == b"hi\n" and quick_time < 1.0
    assert slow.timed_out and slow.exit_code == -1
    assert slow_time < 2.0

    async def sleeper_gone() -> bool:
        return b"sleep 77" not in (await runtime.exec_sync(app, ["ps", "-o", "args"], 5.0)).stdout

    await poll_until(sleeper_gone)


async def test_events_report_lifecycle(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    seen: list[ContainerEvent] = []

    async def collect() -> None:
        async for event in runtime.events():
            seen.append(event)

    collector = asyncio.create_task(collect())
    await asyncio.sleep(0.3)  # subscribed before anything happens
    try:
        sandbox_id = await runtime.run_pod_sandbox(pod)
        app = await run_container(runtime, sandbox_id, pod, container("app", "exit 0"))
        await wait_exited(runtime, app)
        await runtime.remove_container(app)

        async def deleted_seen() -> bool:
            return any(e.container_id == app and e.type is ContainerEventType.DELETED for e in seen)

        await poll_until(deleted_seen)
    finally:
        collector.cancel()
    app_events = [e.type for e in seen if e.container_id == app]
    assert app_events == [
        ContainerEventType.CREATED,
        ContainerEventType.STARTED,
        ContainerEventType.STOPPED,
        ContainerEventType.DELETED,
    ]
    assert all(e.pod_uid == pod.metadata.uid and not e.is_sandbox for e in seen if e.container_id == app)
    assert any(e.container_id == sandbox_id and e.is_sandbox for e in seen)


async def test_container_status_fields(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime, log_directory="")
    sandbox_id = await runtime.run_pod_sandbox(pod)
    before = time.time()
    failing = await run_container(runtime, sandbox_id, pod, container("failing", "sleep 0.2; exit 7"))
    ok = await run_container(runtime, sandbox_id, pod, container("ok", "true", annotations={"a": "b"}))
    created_only = await runtime.create_container(sandbox_id, container("later", "true"), pod)

    status = await wait_exited(runtime, failing)
    assert (status.exit_code, status.reason) == (7, "Error")
    assert before - 1 <= status.created_at <= status.started_at < status.finished_at <= time.time()
    assert status.finished_at - status.started_at >= 0.15
    image = await runtime.image_status(BUSYBOX)
    assert image is not None
    # cri-dockerd reports the image's first repo tag as Docker lists them (the test image has several)
    assert status.image == image.repo_tags[0] and BUSYBOX in image.repo_tags
    expected_ref = f"docker-pullable://{image.repo_digests[0]}" if image.repo_digests else f"docker://{image.id}"
    assert status.image_ref == expected_ref
    assert status.sandbox_id == sandbox_id
    assert status.metadata == ContainerMeta("failing", 0)
    assert status.labels[LABEL_POD_UID] == pod.metadata.uid

    done = await wait_exited(runtime, ok)
    assert (done.exit_code, done.reason, done.annotations) == (0, "Completed", {"a": "b"})

    fresh = await runtime.container_status(created_only)
    assert (fresh.state, fresh.started_at, fresh.finished_at) == (ContainerState.CREATED, 0.0, 0.0)
    listed = {c.id: c.state for c in await runtime.list_containers({LABEL_POD_UID: pod.metadata.uid})}
    assert listed == {
        failing: ContainerState.EXITED,
        ok: ContainerState.EXITED,
        created_only: ContainerState.CREATED,
    }
    with pytest.raises(NotFoundError):
        await runtime.container_status("0" * 64)


async def test_command_and_args_follow_kubernetes_rules(runtime: DockerRuntime, docker_host: str) -> None:
    # An image with both ENTRYPOINT and CMD, made by committing a busybox container.
    image = f"minikubelet.test/ep-cmd:{runtime.test_run}"  # type: ignore[attr-defined]
    client = runtime._client
    base = await client.post("containers/create", {"Image": BUSYBOX, "Cmd": ["true"]})
    try:
        changes = ['ENTRYPOINT ["echo", "ep"]', 'CMD ["cmd"]']
        repo, tag = image.split(":")
        await client.post(
            "commit", None, {"container": base["Id"], "repo": repo, "tag": tag, "changes": "\n".join(changes)}
        )
    finally:
        await client.delete(f"containers/{base['Id']}")
    try:
        pod = pod_config(runtime)
        sandbox_id = await runtime.run_pod_sandbox(pod)
        cases = {
            "neither": ((), (), b"ep cmd\n"),
            "command": (("echo", "c"), (), b"c\n"),
            "args": ((), ("x",), b"ep x\n"),
            "both": (("echo", "c"), ("x",), b"c x\n"),
        }
        ids = {}
        for name, (command, args, _) in cases.items():
            config = ContainerConfig(ContainerMeta(name), image, command=command, args=args)
            ids[name] = await run_container(runtime, sandbox_id, pod, config)
        for name, (_, _, expected) in cases.items():
            await wait_exited(runtime, ids[name])
            assert await runtime.container_logs(ids[name]) == expected, name
    finally:
        for sandbox in await runtime.list_pod_sandboxes({RUN_LABEL: runtime.test_run}):  # type: ignore[attr-defined]
            await runtime.remove_pod_sandbox(sandbox.id)
        await runtime.remove_image(image)
        assert await runtime.image_status(image) is None


async def test_read_file_of_exited_container(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    app = await run_container(
        runtime, sandbox_id, pod, container("app", "printf 'goodbye world' > /tmp/termination-log; exit 1")
    )
    await wait_exited(runtime, app)
    assert await runtime.read_file(app, "/tmp/termination-log", 4096) == b"goodbye world"
    assert await runtime.read_file(app, "/tmp/termination-log", 7) == b"goodbye"
    assert await runtime.read_file(app, "/tmp/absent", 4096) is None
    assert await runtime.read_file(app, "/tmp", 4096) is None
    with pytest.raises(NotFoundError):
        await runtime.read_file("0" * 64, "/tmp/termination-log", 10)


async def test_memory_limit_oom_kill(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    hog = container(
        "hog",
        "dd if=/dev/zero of=/dev/null bs=128M count=1",
        resources=LinuxResources(memory_limit_bytes=32 * 1024 * 1024),
    )
    app = await run_container(runtime, sandbox_id, pod, hog)
    status = await wait_exited(runtime, app)
    assert status.exit_code == 137
    assert status.reason == "OOMKilled"


async def test_stats_and_remove_pod_sandbox(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    app = await run_container(
        runtime, sandbox_id, pod, container("app", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 1000")
    )
    await asyncio.sleep(1.0)
    stats = await runtime.container_stats(app)
    assert stats.cpu_usage_core_nanoseconds > 1_000_000
    assert 0 < stats.memory_working_set_bytes <= stats.memory_usage_bytes
    assert abs(stats.timestamp - time.time()) < 30

    await runtime.stop_container(app, 0)
    await runtime.stop_pod_sandbox(sandbox_id)
    assert (await runtime.pod_sandbox_status(sandbox_id)).state is SandboxState.NOTREADY
    await runtime.remove_pod_sandbox(sandbox_id)
    with pytest.raises(NotFoundError):
        await runtime.pod_sandbox_status(sandbox_id)
    with pytest.raises(NotFoundError):
        await runtime.container_status(app)
    await runtime.remove_pod_sandbox(sandbox_id)  # gone already: not an error


async def test_host_network_sandbox(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime, host_network=True)
    sandbox_id = await runtime.run_pod_sandbox(pod)
    status = await runtime.pod_sandbox_status(sandbox_id)
    assert status.state is SandboxState.READY and status.ip == ""
    assert os.stat(status.network_namespace).st_ino == os.stat("/proc/self/ns/net").st_ino


async def test_images(runtime: DockerRuntime) -> None:
    image = await runtime.image_status(BUSYBOX)
    assert image is not None and image.id.startswith("sha256:")
    assert BUSYBOX in image.repo_tags
    assert any(BUSYBOX in listed.repo_tags for listed in await runtime.list_images())
    assert await runtime.image_status("minikubelet.test/absent:0") is None
    # Pulling an image that is present locally by id-less name still consults the registry,
    # which is unreachable here: the daemon's message must come through as ImagePullError.
    with pytest.raises(ImagePullError) as info:
        await runtime.pull_image("127.0.0.1:1/nothing/here:1")
    assert "127.0.0.1:1" in str(info.value)
    assert (await runtime.info())["Driver"]
    assert (await runtime.runtime_config()).cgroup_driver == (await runtime.info())["CgroupDriver"]
    version = await runtime.version()
    assert (version.runtime_name, version.container_id_scheme) == ("docker", "docker://")
    assert version.runtime_version and version.runtime_api_version.startswith("1.")
    json.dumps(await runtime.info())  # plain JSON, safe to log


async def test_run_pod_sandbox_replaces_a_dead_sandbox(runtime: DockerRuntime) -> None:
    pod = pod_config(runtime)
    first = await runtime.run_pod_sandbox(pod)
    await runtime.stop_pod_sandbox(first)
    second = await runtime.run_pod_sandbox(pod)
    assert second != first
    assert (await runtime.pod_sandbox_status(second)).state is SandboxState.READY
    with pytest.raises(NotFoundError):
        await runtime.pod_sandbox_status(first)


async def test_pod_start_costs_four_engine_requests(runtime: DockerRuntime, tmp_path: Path) -> None:
    """Sandbox create + start, container create + start: the name check, the pause image check, the sandbox
    inspect for resolv.conf and the container inspect for its log path are gone once the data root is known,
    and what they fed is still done (resolv.conf rewritten, the kubelet log path linked to Docker's log)."""
    await runtime.runtime_config()
    pod = pod_config(runtime, log_directory=str(tmp_path))
    app = container("app", "echo started; sleep 1000", log_path="app/0.log")
    (tmp_path / "app").mkdir()
    before = runtime._client.requests
    sandbox_id = await runtime.run_pod_sandbox(pod)
    app_id = await run_container(runtime, sandbox_id, pod, app)
    assert runtime._client.requests - before == 4
    sandbox = await runtime._inspect(sandbox_id)
    with open(sandbox["ResolvConfPath"]) as resolv:
        assert "nameserver 10.96.0.10" in resolv.read()
    inspect = await runtime._inspect(app_id)
    assert os.readlink(tmp_path / "app" / "0.log") == inspect["LogPath"]
    # Again for the same pod: the running sandbox is found through the name conflict, not created twice.
    assert await runtime.run_pod_sandbox(pod) == sandbox_id


async def test_pod_start_without_data_root_asks_the_engine(docker_host: str, tmp_path: Path) -> None:
    """An Engine whose files are not where its data root says (remote, remapped): the paths come from
    inspects, as before."""
    rt = DockerRuntime(docker_host, pause_image=PAUSE_IMAGE, sandbox_stop_timeout=2.0)
    rt.test_run = uuid.uuid4().hex  # type: ignore[attr-defined]
    try:
        await rt.runtime_config()
        rt._data_root = str(tmp_path / "elsewhere")
        pod = pod_config(rt, log_directory=str(tmp_path))
        (tmp_path / "app").mkdir()
        before = rt._client.requests
        sandbox_id = await rt.run_pod_sandbox(pod)
        app_id = await run_container(rt, sandbox_id, pod, container("app", "sleep 1000", log_path="app/0.log"))
        assert rt._client.requests - before == 6
        with open((await rt._inspect(sandbox_id))["ResolvConfPath"]) as resolv:
            assert "nameserver 10.96.0.10" in resolv.read()
        assert os.readlink(tmp_path / "app" / "0.log") == (await rt._inspect(app_id))["LogPath"]
    finally:
        await cri_runtime.cleanup(rt, rt.test_run)  # type: ignore[attr-defined]
        await rt.close()


async def test_missing_pause_image_is_pulled_on_first_sandbox(docker_host: str) -> None:
    """The create answers 404 for a pause image the Engine lacks: it is pulled (here from an unreachable
    registry, so the pull's error comes through) rather than reported as a create failure."""
    rt = DockerRuntime(docker_host, pause_image="127.0.0.1:1/pause:absent", sandbox_stop_timeout=2.0)
    rt.test_run = uuid.uuid4().hex  # type: ignore[attr-defined]
    try:
        with pytest.raises(ImagePullError) as info:
            await rt.run_pod_sandbox(pod_config(rt))
        assert "127.0.0.1:1" in str(info.value)
        assert await rt.list_pod_sandboxes({RUN_LABEL: rt.test_run}) == []  # type: ignore[attr-defined]
    finally:
        await rt.close()


async def build_image(runtime: DockerRuntime, tag: str, dockerfile: str) -> None:
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    async with runtime._client.stream(
        "build",
        "POST",
        params={"t": tag, "rm": "1"},
        body=context.getvalue(),
        headers={"Content-Type": "application/x-tar"},
    ) as response:
        output = await response.read()
    assert b'"error"' not in output, output


async def test_image_stop_signal_is_reported_and_used(runtime: DockerRuntime) -> None:
    image = f"minikubelet.test/stopsig:{runtime.test_run}"  # type: ignore[attr-defined]
    await build_image(runtime, image, f"FROM {BUSYBOX}\nSTOPSIGNAL SIGUSR1\nUSER 1000\n")
    try:
        status = await runtime.image_status(image)
        assert status is not None and (status.stop_signal, status.user) == ("SIGUSR1", "1000")
        pod = pod_config(runtime)
        sandbox_id = await runtime.run_pod_sandbox(pod)
        config = ContainerConfig(
            ContainerMeta("app"), image, command=("sh", "-c", "trap 'exit 10' USR1; while true; do sleep 0.1; done")
        )
        app = await run_container(runtime, sandbox_id, pod, config)
        assert (await runtime.exec_sync(app, ["id", "-u"], 5.0)).stdout == b"1000\n"
        await asyncio.sleep(0.5)
        await runtime.stop_container(app, 5.0)
        assert (await runtime.container_status(app)).exit_code == 10
    finally:
        for sandbox in await runtime.list_pod_sandboxes({RUN_LABEL: runtime.test_run}):  # type: ignore[attr-defined]
            await runtime.remove_pod_sandbox(sandbox.id)
        await runtime.remove_image(image)
