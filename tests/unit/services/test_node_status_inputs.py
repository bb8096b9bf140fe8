"""The node status's image list: read from the runtime at most every 30 s, as upstream's image cache is."""

from __future__ import annotations

from cri.errors import RuntimeUnavailableError
from cri.fake import FakeRuntime
from minikubelet.base.clock import FakeClock
from minikubelet.services.node_status_inputs import IMAGE_LIST_PERIOD, ImageList


def _listings(runtime: FakeRuntime) -> int:
    return sum(1 for c in runtime.calls if c.op == "list_images")


async def test_the_image_list_is_read_again_only_once_it_is_30_s_old() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox:1"])
    images = ImageList(runtime, clock)
    first = await images.get()
    assert any("busybox:1" in i.repo_tags for i in first)
    runtime.add_image("busybox:2")
    clock.advance(10)
    assert await images.get() == first  # the status built 10 s later shows the cached list
    clock.advance(IMAGE_LIST_PERIOD - 10)
    assert any("busybox:2" in i.repo_tags for i in await images.get())
    assert _listings(runtime) == 2


async def test_a_failed_image_list_keeps_the_last_one_until_the_next_period() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock, images=["busybox:1"])
    images = ImageList(runtime, clock)
    first = await images.get()
    clock.advance(IMAGE_LIST_PERIOD)
    runtime.fail("list_images", RuntimeUnavailableError("runtime down"))
    assert await images.get() == first
    clock.advance(1)
    assert await images.get() == first and _listings(runtime) == 2  # no retry before the period
    clock.advance(IMAGE_LIST_PERIOD)
    assert await images.get() == first and _listings(runtime) == 3
