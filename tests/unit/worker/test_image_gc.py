"""Image garbage collection on the fake runtime and the fake clock (upstream image_gc_manager.go rules)."""

from __future__ import annotations

import asyncio
import contextlib

from cri.fake import FakeRuntime
from cri.types import ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from minikubelet.base.clock import FakeClock
from minikubelet.worker.image_gc import ImageGC, ImageGCError, ImageGCPolicy, format_size

PAUSE = "registry.k8s.io/pause:3.10"
GB = 10**9


class Disk:
    """The image filesystem as the GC sees it: capacity and what is available, freed as images go."""

    def __init__(self, rt: FakeRuntime, capacity: int, used_by_other: int) -> None:
        self.rt = rt
        self.capacity = capacity
        self.other = used_by_other

    async def __call__(self) -> tuple[int, int]:
        images = sum(i.size for i in await self.rt.list_images())
        return self.capacity, max(0, self.capacity - self.other - images)


def setup(high: int = 85, low: int = 80, min_age: float = 0.0, max_age: float = 0.0,
          used: int = 0) -> tuple[FakeClock, FakeRuntime, ImageGC, list[tuple[str, str, str]]]:
    clock = FakeClock()
    rt = FakeRuntime(clock, pause_image=PAUSE)
    events: list[tuple[str, str, str]] = []
    gc = ImageGC(rt, clock, ImageGCPolicy(high, low, min_age, max_age), PAUSE, Disk(rt, 10 * 1024, used),
                 lambda t, r, m: events.append((t, r, m)), period=300)
    return clock, rt, gc, events


def tags(rt: FakeRuntime) -> set[str]:
    return {t for i in rt._images.values() for t in i.repo_tags}


async def run_container(rt: FakeRuntime, image: str) -> str:
    cfg = PodSandboxConfig(PodMeta("p", "default", "uid-1", 0))
    sid = await rt.run_pod_sandbox(cfg)
    cid = await rt.create_container(sid, ContainerConfig(ContainerMeta("c", 0), image), cfg)
    await rt.start_container(cid)
    return cid


async def test_least_recently_used_goes_first_until_the_low_threshold() -> None:
    # fake images are 1024 bytes each on a 10240-byte disk with 5000 bytes of other data: 89% used
    clock, rt, gc, events = setup(high=85, low=70, min_age=1, used=5000)
    for name in ("old:1", "mid:1", "new:1"):
        rt.add_image(name)
    ids = {n: rt._images[f"{n}:1"].id for n in ("old", "mid", "new")}
    cid = await run_container(rt, "old:1")
    try:  # old:1 is in use, the others younger than the minimum age: nothing to free yet
        await gc.garbage_collect()
    except ImageGCError:
        pass
    assert gc.removed == [] and [e[1] for e in events] == ["FreeDiskSpaceFailed"]
    await rt.remove_container(cid)
    clock.advance(5)
    await run_container(rt, "mid:1")
    # down to 70% means freeing 3072 - 1144 = 1928 bytes: the never used image, then the least recently used
    await gc.garbage_collect()
    assert gc.removed == [ids["new"], ids["old"]]
    assert {"mid:1", PAUSE} <= tags(rt)
    assert len(events) == 1


async def test_images_in_use_and_the_pause_image_are_never_removed_and_failure_is_reported() -> None:
    clock, rt, gc, events = setup(high=50, low=10, used=6000)
    rt.add_image("app:1")
    await run_container(rt, "app:1")
    clock.advance(10)
    try:
        await gc.garbage_collect()
        raise AssertionError("expected a failure: nothing may be removed")
    except ImageGCError as e:
        message = str(e)
    assert {"app:1", PAUSE} <= tags(rt)
    assert gc.removed == []
    assert events == [("Warning", "FreeDiskSpaceFailed", message)]
    assert message.startswith("Insufficient free disk space on the node's image filesystem (79% of 10.0 KiB used). "
                              "Failed to free sufficient space by deleting unused images (freed 0 bytes).")


async def test_minimum_age_protects_new_images() -> None:
    clock, rt, gc, _ = setup(high=50, low=10, min_age=120, used=6000)
    rt.add_image("young:1")
    try:
        await gc.garbage_collect()
    except ImageGCError:
        pass
    assert "young:1" in tags(rt)
    clock.advance(121)
    try:
        await gc.garbage_collect()
    except ImageGCError:
        pass
    assert "young:1" not in tags(rt)


async def test_below_the_high_threshold_nothing_goes() -> None:
    clock, rt, gc, events = setup(high=85, low=80, used=0)
    rt.add_image("idle:1")
    clock.advance(600)
    await gc.garbage_collect()
    assert "idle:1" in tags(rt) and gc.removed == [] and events == []


async def test_maximum_age_removes_images_unused_for_longer() -> None:
    clock, rt, gc, _ = setup(max_age=60, used=0)
    rt.add_image("stale:1")
    await gc.garbage_collect()
    clock.advance(61)
    await gc.garbage_collect()
    assert "stale:1" not in tags(rt) and PAUSE in tags(rt)


async def test_delete_unused_images_ignores_the_thresholds() -> None:
    clock, rt, gc, _ = setup(used=0)
    rt.add_image("a:1")
    rt.add_image("b:1")
    await run_container(rt, "b:1")
    clock.advance(1)
    await gc.delete_unused_images()
    assert "b:1" in tags(rt) and PAUSE in tags(rt) and "a:1" not in tags(rt)


def test_format_size() -> None:
    assert [format_size(n) for n in (512, 1536, 10 * 2**20, 3 * 2**30 + 2**29, 2**41)] == [
        "512 B", "1.5 KiB", "10.0 MiB", "3.5 GiB", "2.0 TiB"]


async def test_repeated_failures_become_an_image_gc_failed_event() -> None:
    clock, _rt, gc, events = setup(high=50, low=10, used=6000)
    task = asyncio.create_task(gc.run())
    await asyncio.sleep(0)  # the loop is asleep for its first period
    for _ in range(3):
        clock.advance(300)
        for _ in range(20):
            await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    reasons = [r for _, r, _ in events]
    # every pass reports FreeDiskSpaceFailed; the second failure in a row and later ones also ImageGCFailed
    assert reasons == ["FreeDiskSpaceFailed", "FreeDiskSpaceFailed", "ImageGCFailed", "FreeDiskSpaceFailed",
                       "ImageGCFailed"]
    assert events[2][2] == events[1][2]


async def test_high_threshold_100_without_maximum_age_turns_the_loop_off() -> None:
    _clock, rt, gc, events = setup(high=100, low=10, used=10_000)
    rt.add_image("idle:1")
    await asyncio.wait_for(gc.run(), timeout=1)  # returns at once instead of looping
    assert gc.removed == [] and events == []
