"""The pod cache: which runtime changes the last sync's view of a pod already shows, on the fake runtime."""

from __future__ import annotations

from cri.fake import FakeRuntime
from cri.types import ContainerConfig, ContainerEventType, ContainerMeta, PodMeta, PodSandboxConfig
from minikubelet.base.clock import FakeClock
from minikubelet.runtime.pod_cache import ObjectEvent, PodListing, SeenPod
from minikubelet.runtime.state import PodRuntimeState

IMAGE = "busybox:1.36"
CONFIG = PodSandboxConfig(PodMeta("web", "default", "uid-web"))


async def seen_pod(read_at: float) -> tuple[FakeRuntime, SeenPod, str, str]:
    """A running pod as a sync reads it at `read_at`: (runtime, view, sandbox id, container id)."""
    rt = FakeRuntime(FakeClock(), images=[IMAGE])
    sandbox = await rt.run_pod_sandbox(CONFIG)
    container = await rt.create_container(sandbox, ContainerConfig(ContainerMeta("app"), IMAGE), CONFIG)
    await rt.start_container(container)
    state = PodRuntimeState("uid-web", list(await rt.list_pod_sandboxes()), list(await rt.list_containers()),
                            {sandbox: read_at, container: read_at})
    return rt, SeenPod.of(state), sandbox, container


async def test_events_of_steps_the_view_shows_are_reflected() -> None:
    _, seen, sandbox, container = await seen_pod(read_at=10.0)
    late = 20.0  # arrived after the read: only the step can tell
    assert seen.reflects(ObjectEvent(container, ContainerEventType.STARTED, late))
    assert seen.reflects(ObjectEvent(sandbox, ContainerEventType.STARTED, late))
    assert seen.reflects(ObjectEvent(container, ContainerEventType.CREATED, late))  # created once, seen since


async def test_events_the_view_does_not_show_are_not() -> None:
    _, seen, sandbox, container = await seen_pod(read_at=10.0)
    assert not seen.reflects(ObjectEvent(container, ContainerEventType.STOPPED, 20.0))  # it was running
    assert not seen.reflects(ObjectEvent(sandbox, ContainerEventType.DELETED, 20.0))
    assert not seen.reflects(ObjectEvent("other", ContainerEventType.CREATED, 20.0))  # never seen
    # any event that reached the agent before the object was read is in what was read
    assert seen.reflects(ObjectEvent(container, ContainerEventType.STOPPED, 5.0))
    assert not seen.reflects(ObjectEvent("other", ContainerEventType.STARTED, 5.0))


async def test_an_exited_container_is_seen_exited() -> None:
    rt, _, sandbox, container = await seen_pod(read_at=0.0)
    rt.exit_container(container, 1)
    state = PodRuntimeState("uid-web", list(await rt.list_pod_sandboxes()), list(await rt.list_containers()))
    seen = SeenPod.of(state)
    assert seen.reflects(ObjectEvent(container, ContainerEventType.STOPPED, 20.0))
    assert not seen.reflects(ObjectEvent(container, ContainerEventType.STARTED, 20.0))  # started again since?
    assert not seen.reflects(PodListing(frozenset({(sandbox, "running"), (container, "running")}), 20.0))


async def test_a_listing_is_reflected_when_every_object_is_in_its_step_or_read_after_it() -> None:
    _, seen, sandbox, container = await seen_pod(read_at=10.0)
    same = frozenset({(sandbox, "running"), (container, "running")})
    assert seen.reflects(PodListing(same, 20.0))
    older = frozenset({(sandbox, "running"), (container, "created")})
    assert seen.reflects(PodListing(older, 20.0))  # created once: a listing from before its start
    assert seen.reflects(PodListing(older, 5.0))
    exited = frozenset({(sandbox, "running"), (container, "exited")})
    assert not seen.reflects(PodListing(exited, 20.0))
    assert seen.reflects(PodListing(exited, 5.0))  # listed before the read: the read is newer
    assert not seen.reflects(PodListing(frozenset({*same, ("other", "running")}), 5.0))  # not seen here


async def test_an_object_seen_but_not_listed_was_created_after_the_listing_or_is_gone() -> None:
    _, seen, sandbox, _ = await seen_pod(read_at=10.0)
    sandbox_only = frozenset({(sandbox, "running")})
    assert seen.reflects(PodListing(sandbox_only, 5.0))  # the container came after the listing
    assert not seen.reflects(PodListing(sandbox_only, 20.0))  # listed after the read without it: gone
    assert not seen.reflects(PodListing(frozenset(), 20.0))  # the whole pod gone
