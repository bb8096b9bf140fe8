"""The PLEG on the fake runtime: relist diffs wake the right pods, events wake pods, health, errors."""

from __future__ import annotations

import asyncio

import pytest

from cri.errors import RuntimeUnavailableError
from cri.fake import FakeRuntime, Program
from cri.types import ContainerConfig, ContainerMeta, ObjectSummary, PodMeta, PodSandboxConfig
from minikubelet.base.clock import FakeClock
from minikubelet.metrics import Metrics
from minikubelet.runtime.pleg import PLEG
from minikubelet.runtime.pod_cache import SeenPod
from minikubelet.runtime.state import PodRuntimeState

IMAGE = "busybox:1.36"


def pod(name: str) -> PodSandboxConfig:
    return PodSandboxConfig(PodMeta(name, "default", f"uid-{name}"), labels={"app": name})


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class Env:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.runtime = FakeRuntime(self.clock, images=[IMAGE])
        self.metrics = Metrics()
        self.woken: list[str] = []
        self.pleg = PLEG(self.runtime, self.clock, self.metrics, self.woken.append, relist_period=1.0)

    async def run(self, config: PodSandboxConfig, name: str = "app") -> str:
        sandbox_id = await self.runtime.run_pod_sandbox(config)
        container_id = await self.runtime.create_container(sandbox_id, ContainerConfig(ContainerMeta(name), IMAGE), config)
        await self.runtime.start_container(container_id)
        return container_id

    async def relist(self) -> list[str]:
        """The pods one relist wakes, in order."""
        self.woken.clear()
        await self.pleg.relist()
        return sorted(self.woken)


@pytest.fixture
def env() -> Env:
    return Env()


async def test_relist_wakes_only_pods_whose_containers_changed(env: Env) -> None:
    assert await env.relist() == []
    web = await env.run(pod("web"))
    await env.run(pod("db"))
    assert await env.relist() == ["uid-db", "uid-web"]
    assert await env.relist() == []  # nothing changed

    env.runtime.exit_container(web, 1)  # died
    assert await env.relist() == ["uid-web"]

    sandbox_id = (await env.runtime.list_pod_sandboxes({"app": "db"}))[0].id
    side = await env.runtime.create_container(sandbox_id, ContainerConfig(ContainerMeta("side"), IMAGE), pod("db"))
    assert await env.relist() == ["uid-db"]  # created
    await env.runtime.start_container(side)
    assert await env.relist() == ["uid-db"]  # started

    env.runtime.vanish(web, emit=False)  # removed behind our back
    assert await env.relist() == ["uid-web"]

    await env.runtime.remove_pod_sandbox(sandbox_id)  # the pod is gone altogether
    assert await env.relist() == ["uid-db"]
    assert set(env.pleg.runtime_uids) == {"uid-web"}


async def test_relist_notices_a_restart_of_the_same_container_name(env: Env) -> None:
    env.runtime.program("app", Program(exit_on_start=1))
    config = pod("web")
    await env.run(config)
    await env.relist()
    sandbox_id = (await env.runtime.list_pod_sandboxes())[0].id
    retry = await env.runtime.create_container(sandbox_id, ContainerConfig(ContainerMeta("app", 1), IMAGE), config)
    await env.runtime.start_container(retry)
    assert await env.relist() == ["uid-web"]


async def test_runtime_uids_carry_the_sandbox_labels(env: Env) -> None:
    await env.run(pod("web"))
    await env.pleg.relist()
    assert env.pleg.runtime_uids["uid-web"]["app"] == "web"  # a container has no pod labels; the sandbox has


async def test_last_relist_is_the_clock_time_of_the_last_success(env: Env) -> None:
    assert env.pleg.last_relist == 0.0
    env.clock.advance(42)
    await env.pleg.relist()
    assert env.pleg.last_relist == 42
    env.runtime.fail("list_summaries", RuntimeUnavailableError("docker is down"))
    env.clock.advance(10)
    with pytest.raises(RuntimeUnavailableError):
        await env.pleg.relist()
    assert env.pleg.last_relist == 42
    assert env.metrics.registry.get_sample_value("kubelet_pleg_relist_duration_seconds_count") == 1


async def test_a_runtime_error_does_not_end_the_relist_loop(env: Env) -> None:
    env.runtime.fail("list_summaries", RuntimeUnavailableError("docker is down"), times=2)
    loop = asyncio.create_task(env.pleg.run_relist())
    try:
        await settle()
        assert env.pleg.last_relist == 0.0
        await env.run(pod("web"))
        env.clock.advance(1)
        await settle()
        assert env.pleg.last_relist == 0.0 and env.woken == []
        env.clock.advance(1)
        await settle()
        assert (env.pleg.last_relist, env.woken) == (2.0, ["uid-web"])
        assert not loop.done()
        assert env.runtime.ops().count("list_summaries") == 3
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_relist_runs_every_period(env: Env) -> None:
    loop = asyncio.create_task(env.pleg.run_relist())
    try:
        await settle()
        for _ in range(3):
            env.clock.advance(1)
            await settle()
        assert env.runtime.ops().count("list_summaries") == 4
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_a_broken_event_stream_is_subscribed_again(env: Env) -> None:
    events = asyncio.create_task(env.pleg.run_events())
    try:
        await settle()
        env.runtime.break_events(RuntimeUnavailableError("connection reset"))
        await settle()
        await env.run(pod("lost"))  # while unsubscribed: only a relist would see it
        await settle()
        assert env.woken == [] and not events.done()
        env.clock.advance(1)
        await settle()
        await env.run(pod("web"))
        await settle()
        assert set(env.woken) == {"uid-web"}
        env.runtime.break_events()  # a stream that just ends is subscribed again too
        await settle()
        env.clock.advance(1)
        await settle()
        assert env.runtime.ops().count("events") == 3
    finally:
        events.cancel()
        await asyncio.gather(events, return_exceptions=True)


async def test_events_wake_their_pods(env: Env) -> None:
    events = asyncio.create_task(env.pleg.run_events())
    try:
        await settle()
        web = await env.run(pod("web"))
        await settle()
        assert set(env.woken) == {"uid-web"} and len(env.woken) == 4  # sandbox created+started, app the same
        env.woken.clear()
        env.runtime.exit_container(web, 0)
        await settle()
        assert env.woken == ["uid-web"]
        assert "list_summaries" not in env.runtime.ops()  # events alone, no relist
    finally:
        events.cancel()
        await asyncio.gather(events, return_exceptions=True)


async def test_confirms_a_pod_state_only_from_a_relist_asked_after_it_that_lists_it_the_same(env: Env) -> None:
    """What lets a pod worker's resync read its cached state (upstream's pod cache GetNewerThan)."""
    cid = await env.run(pod("a"))

    async def seen() -> SeenPod:
        return SeenPod.of(PodRuntimeState("uid-a", await env.runtime.list_pod_sandboxes({}),
                                          await env.runtime.list_containers({})))

    state = await seen()
    synced = env.clock.monotonic()
    assert not env.pleg.confirms("uid-a", state, synced)  # no relist yet
    env.clock.advance(1)
    await env.relist()
    assert env.pleg.confirms("uid-a", state, synced)
    assert not env.pleg.confirms("uid-a", state, env.clock.monotonic())  # the relist was not after this sync
    assert not env.pleg.confirms("uid-b", state, synced)  # listed as nothing
    env.runtime.exit_container(cid, 0)
    env.clock.advance(1)
    await env.relist()
    assert not env.pleg.confirms("uid-a", state, synced)  # the container exited since
    assert env.pleg.confirms("uid-a", await seen(), synced)


class ListingRuntime(FakeRuntime):
    """Hands back the summaries of its last listing while they are equal, as the Docker and CRI clients'
    listings do (cri/docker/listing.py, cri/remote/listing.py)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock, images=[IMAGE])
        self.last: list[ObjectSummary] = []

    async def list_summaries(self) -> list[ObjectSummary]:
        listed = await super().list_summaries()
        if listed != self.last:
            self.last = listed
        return list(self.last)


async def test_an_unchanged_listing_is_not_diffed_again_but_still_counts_as_a_relist() -> None:
    clock = FakeClock()
    runtime = ListingRuntime(clock)
    metrics = Metrics()
    woken: list[str] = []
    pleg = PLEG(runtime, clock, metrics, woken.append)
    env = Env()
    env.clock, env.runtime, env.metrics, env.woken, env.pleg = clock, runtime, metrics, woken, pleg
    cid = await env.run(pod("a"))
    assert await env.relist() == ["uid-a"]
    uids, running = pleg.runtime_uids, pleg.running_uids

    async def state() -> SeenPod:
        return SeenPod.of(PodRuntimeState("uid-a", await runtime.list_pod_sandboxes({}),
                                          await runtime.list_containers({})))

    synced = await state()
    since = clock.monotonic()
    clock.advance(1)
    assert await env.relist() == []
    assert pleg.runtime_uids is uids and pleg.running_uids is running  # nothing rebuilt
    assert pleg.last_relist == clock.monotonic() and pleg.listed_from > since
    assert pleg.confirms("uid-a", synced, since)  # the unchanged relist confirms what the worker saw
    assert metrics.registry.get_sample_value("kubelet_running_pods") == 1  # as the last diffed relist left it
    runtime.exit_container(cid, 0)
    clock.advance(1)
    assert await env.relist() == ["uid-a"]
    assert pleg.running_uids == frozenset({"uid-a"})  # the ready sandbox still counts
    assert not pleg.confirms("uid-a", synced, since)
