"""Probes against real containers (DockerRuntime on the test engine; pytest runs in its netns)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from cri.docker import DockerRuntime
from cri.types import LABEL_POD_UID, ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from minikubelet.base.clock import RealClock
from minikubelet.base.podview import PodView
from minikubelet.base.prometheus import CollectorRegistry
from probes.exec import probe_exec
from probes.grpc import probe_grpc
from probes.manager import ProbeManager
from probes.result import ProbeOutcome, Result
from tests.images import BUSYBOX_IMAGE
from tests.integration import cri_runtime
from tests.integration.cri_runtime import RUN_LABEL

pytestmark = pytest.mark.integration

GRPC_HEALTH = "minikubelet.test/grpc-health:1"  # scripts/images/grpc-health/build.sh

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T | None]], timeout: float) -> T:
    """Poll until check() returns something other than None."""
    async with asyncio.timeout(timeout):
        while True:
            value = await check()
            if value is not None:
                return value
            await asyncio.sleep(0.1)


runtime = cri_runtime.runtime


class Pod:
    def __init__(self, rt: DockerRuntime) -> None:
        self.rt = rt
        self.uid = str(uuid.uuid4())
        self.config = PodSandboxConfig(
            metadata=PodMeta(name="probed", namespace="default", uid=self.uid, attempt=0),
            hostname="probed",
            labels={RUN_LABEL: rt.test_run, LABEL_POD_UID: self.uid},  # type: ignore[attr-defined]
        )
        self.sandbox_id = ""
        self.ip = ""

    async def start(self) -> Pod:
        self.sandbox_id = await self.rt.run_pod_sandbox(self.config)
        self.ip = (await self.rt.pod_sandbox_status(self.sandbox_id)).ip
        return self

    async def run(self, name: str, image: str = BUSYBOX_IMAGE, script: str = "", **env: str) -> str:
        config = ContainerConfig(
            metadata=ContainerMeta(name=name),
            image=image,
            command=("sh", "-c", script) if script else (),
            envs=tuple(env.items()),
        )
        container_id = await self.rt.create_container(self.sandbox_id, config, self.config)
        await self.rt.start_container(container_id)
        return container_id


async def test_exec_probe_exit_codes_output_and_timeout(runtime: DockerRuntime) -> None:
    pod = await Pod(runtime).start()
    app = await pod.run("app", script="touch /tmp/healthy; exec sleep 1000")

    ok = await probe_exec(runtime, app, ["cat", "/tmp/healthy"], 5)
    assert ok.result is Result.SUCCESS
    bad = await probe_exec(runtime, app, ["sh", "-c", "echo nope >&2; exit 2"], 5)
    assert (bad.result, bad.output) == (Result.FAILURE, "nope\n")
    began = time.monotonic()
    slow = await probe_exec(runtime, app, ["sleep", "30"], 1)
    assert time.monotonic() - began < 4
    assert (slow.result, slow.output) == (Result.FAILURE, 'command "sleep 30" timed out')
    missing = await probe_exec(runtime, "0" * 64, ["true"], 1)
    assert missing.result is Result.UNKNOWN


async def test_manager_end_to_end_liveness_exec_and_readiness_http(runtime: DockerRuntime) -> None:
    pod = await Pod(runtime).start()
    app = await pod.run(
        "app",
        script="mkdir -p /www && echo ok > /www/ready && touch /tmp/healthy && httpd -p 8080 -h /www "
        "&& sleep 3 && rm /tmp/healthy && exec sleep 1000",
    )
    spec: dict[str, Any] = {
        "metadata": {"name": "probed", "namespace": "default", "uid": pod.uid},
        "spec": {"containers": [{
            "name": "app",
            "ports": [{"name": "web", "containerPort": 8080}],
            "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1,
                              "timeoutSeconds": 2, "successThreshold": 1, "failureThreshold": 2,
                              "initialDelaySeconds": 0},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "web", "scheme": "HTTP"},
                               "periodSeconds": 1, "timeoutSeconds": 1, "successThreshold": 1,
                               "failureThreshold": 3, "initialDelaySeconds": 0},
        }]},
    }
    events: list[str] = []

    def record(pod: dict[str, Any], etype: str, reason: str, message: str, container: str = "") -> None:
        events.append(f"{reason}: {message}")

    changed = asyncio.Event()
    manager = ProbeManager(runtime, RealClock(), CollectorRegistry(), lambda uid: changed.set(), events=record)

    async def wait_for(condition: Callable[[], bool]) -> bool | None:
        changed.clear()
        if condition():
            return True
        await changed.wait()  # a result changed: look again
        return None

    try:
        manager.update_pod(PodView.of(spec), pod.ip, {"app": app}, {"app": time.time()})
        await eventually(lambda: wait_for(lambda: manager.readiness(pod.uid, "app")), 10)
        try:
            await eventually(lambda: wait_for(lambda: manager.liveness_failed(pod.uid, "app", app) is not None), 15)
        except TimeoutError:
            pytest.fail(f"no liveness failure; events: {events}")
        failure = manager.liveness_failed(pod.uid, "app", app)
        assert failure is not None
        assert failure.message() == "Container app failed liveness probe, will be restarted"
        assert "Unhealthy: Liveness probe failed: cat: can't open '/tmp/healthy': No such file or directory\n" \
            in events
        assert manager.readiness(pod.uid, "app")  # readiness is independent of liveness
    finally:
        await manager.close()


async def test_grpc_probe_against_health_image(runtime: DockerRuntime) -> None:
    if await runtime.image_status(GRPC_HEALTH) is None:
        pytest.skip(f"{GRPC_HEALTH} not built (scripts/images/grpc-health/build.sh)")
    pod = await Pod(runtime).start()
    server = await pod.run("grpc", image=GRPC_HEALTH, PORT="7777")
    async def answered() -> ProbeOutcome | None:
        outcome = await probe_grpc(pod.ip, 7777, "", 1)
        return None if outcome.output.startswith(("timeout", "error")) else outcome

    try:
        outcome = await eventually(answered, 15)
    except TimeoutError:
        logs = await runtime.container_logs(server)
        pytest.fail(f"the gRPC health server never answered; logs: {logs!r}")
    assert outcome.result is Result.FAILURE
    assert outcome.output == 'service unhealthy (responded with "NOT_SERVING")'
    await runtime.exec_sync(server, ["/usr/bin/python3", "-c", "open('/tmp/healthy', 'w')"], 10)
    async def serving() -> ProbeOutcome | None:
        outcome = await probe_grpc(pod.ip, 7777, "", 1)
        return outcome if outcome.result is Result.SUCCESS else None

    outcome = await eventually(serving, 5)
    assert outcome.output == "service is serving"
