"""InstrumentedRuntime: upstream's operation names, durations on the injected timer, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cri.errors import CreateContainerError
from cri.fake import FakeRuntime, Program
from cri.instrumented import InstrumentedRuntime
from cri.timeouts import RequestTimeoutRuntime
from cri.types import ContainerConfig, ContainerMeta, ExecResult, PodMeta, PodSandboxConfig
from minikubelet.agent import Agent
from minikubelet.base.clock import FakeClock
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.metrics import Metrics
from probes.exec import probe_exec

IMAGE = "busybox:1.36"
POD = PodSandboxConfig(PodMeta("web", "default", "uid-1"))
APP = ContainerConfig(ContainerMeta("app"), IMAGE)


class Env:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.fake = FakeRuntime(self.clock, images=[IMAGE])
        self.metrics = Metrics()
        m = self.metrics
        self.runtime = InstrumentedRuntime(
            self.fake, m.runtime_operations, m.runtime_operations_duration, m.runtime_operations_errors,
            timer=self.clock.monotonic,
        )

    def sample(self, name: str, operation: str) -> float:
        value = self.metrics.registry.get_sample_value(name, {"operation_type": operation})
        return 0.0 if value is None else value

    def count(self, operation: str) -> float:
        return self.sample("kubelet_runtime_operations_total", operation)

    def errors(self, operation: str) -> float:
        return self.sample("kubelet_runtime_operations_errors_total", operation)

    def seconds(self, operation: str) -> float:
        return self.sample("kubelet_runtime_operations_duration_seconds_sum", operation)


async def test_a_pod_lifecycle_is_counted_under_upstream_names() -> None:
    env = Env()
    rt = env.runtime
    assert (await rt.pull_image("nginx")).startswith("sha256:")
    await rt.image_status(IMAGE)
    sandbox_id = await rt.run_pod_sandbox(POD)
    await rt.pod_sandbox_status(sandbox_id)
    container_id = await rt.create_container(sandbox_id, APP, POD)
    await rt.start_container(container_id)
    await rt.container_status(container_id)
    await rt.list_containers({})
    await rt.list_pod_sandboxes()
    await rt.list_summaries()
    await rt.stop_container(container_id, 10)
    await rt.stop_pod_sandbox(sandbox_id)
    await rt.remove_container(container_id)
    await rt.remove_pod_sandbox(sandbox_id)
    await rt.version()
    await rt.runtime_config()
    expected = [
        "pull_image", "image_status", "run_podsandbox", "podsandbox_status", "create_container",
        "start_container", "container_status", "list_containers", "list_podsandbox", "list_summaries",
        "stop_container", "stop_podsandbox", "remove_container", "remove_podsandbox", "version", "runtime_config",
    ]
    assert {op: env.count(op) for op in expected} == dict.fromkeys(expected, 1.0)
    assert all(env.errors(op) == 0 for op in expected)


async def test_duration_is_the_call_time_on_the_timer() -> None:
    env = Env()
    env.fake.program("app", Program(ignore_stop_signal=True))
    sandbox_id = await env.runtime.run_pod_sandbox(POD)
    container_id = await env.runtime.create_container(sandbox_id, APP, POD)
    await env.runtime.start_container(container_id)
    stop = asyncio.create_task(env.runtime.stop_container(container_id, 30))
    for _ in range(10):
        await asyncio.sleep(0)
    env.clock.advance(30)
    await stop
    assert env.seconds("stop_container") == 30
    assert env.seconds("start_container") == 0


async def test_errors_are_counted_with_the_operation() -> None:
    env = Env()
    sandbox_id = await env.runtime.run_pod_sandbox(POD)
    env.fake.fail("create_container", CreateContainerError("no space left on device"))
    with pytest.raises(CreateContainerError):
        await env.runtime.create_container(sandbox_id, APP, POD)
    await env.runtime.create_container(sandbox_id, APP, POD)
    assert (env.count("create_container"), env.errors("create_container")) == (2, 1)


async def test_cancelled_calls_count_but_are_not_errors() -> None:
    env = Env()
    gate = env.fake.hang("list_images")
    listing = asyncio.create_task(env.runtime.list_images())
    await gate.entered.wait()
    listing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await listing
    assert (env.count("list_images"), env.errors("list_images")) == (1, 0)


async def test_exec_from_a_probe_counts_and_failed_commands_are_errors() -> None:
    env = Env()
    sandbox_id = await env.runtime.run_pod_sandbox(POD)
    container_id = await env.runtime.create_container(sandbox_id, APP, POD)
    await env.runtime.start_container(container_id)
    env.fake.set_exec(lambda _cid, cmd: ExecResult(0 if cmd == ["ok"] else 1))
    await probe_exec(env.runtime, container_id, ["ok"], 1)
    await probe_exec(env.runtime, container_id, ["fail"], 1)
    # As the CRI client reports a non-zero exit as an error, upstream counts it as one.
    assert (env.count("exec_sync"), env.errors("exec_sync")) == (2, 1)


async def test_event_stream_is_recorded_when_it_ends() -> None:
    env = Env()
    stream = env.runtime.events()
    await env.runtime.run_pod_sandbox(POD)  # subscribed before the first read
    first = await anext(stream)
    assert first.is_sandbox and env.count("get_container_events") == 0
    env.clock.advance(5)
    await stream.aclose()  # type: ignore[attr-defined]
    assert (env.count("get_container_events"), env.seconds("get_container_events")) == (1, 5)


def test_the_agent_hands_every_component_the_instrumented_runtime(tmp_path: Path) -> None:
    fake = FakeRuntime(FakeClock())
    agent = Agent(KubeletConfig(root_dir=str(tmp_path), static_pod_path=str(tmp_path / "manifests")), fake,
                  clock=FakeClock())
    assert isinstance(agent.runtime, InstrumentedRuntime)
    bounded = agent.runtime.runtime  # runtimeRequestTimeout applies under the metrics
    assert isinstance(bounded, RequestTimeoutRuntime) and bounded.runtime is fake
    assert agent.syncer._runtime is agent.runtime and agent.containers._runtime is agent.runtime
    assert agent.images._images is agent.runtime
    assert agent.pleg._runtime is agent.runtime
    assert agent.probes.manager._runtime is agent.runtime  # type: ignore[attr-defined]
