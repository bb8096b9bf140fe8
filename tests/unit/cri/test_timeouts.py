"""runtimeRequestTimeout bounds each runtime call as upstream's CRI client does."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.timeouts import RequestTimeoutRuntime, RuntimeRequestTimeoutError
from cri.types import PodSandboxConfig, RuntimeVersion


class _Slow:
    """Each call takes `delay` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def version(self) -> RuntimeVersion:
        await asyncio.sleep(self.delay)
        return RuntimeVersion("docker", "1", "1.41")

    async def run_pod_sandbox(self, config: object) -> str:
        await asyncio.sleep(self.delay)
        return "sb"

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        await asyncio.sleep(self.delay)

    async def pull_image(self, image: str, auth: object = None) -> str:
        await asyncio.sleep(self.delay)
        return "sha256:x"

    async def image_status(self, image: str) -> None:
        raise TimeoutError("the runtime's own timeout")


def wrap(delay: float, timeout: float) -> RequestTimeoutRuntime:
    return RequestTimeoutRuntime(cast(Runtime, _Slow(delay)), timeout)


async def test_a_call_within_the_timeout_returns() -> None:
    assert (await wrap(0.0, 0.5).version()).runtime_name == "docker"


async def test_a_call_past_the_timeout_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeRequestTimeoutError, match=r"^Version: context deadline exceeded") as e:
        await wrap(0.3, 0.05).version()
    assert isinstance(e.value, RuntimeError_)


async def test_sandboxes_get_twice_the_timeout_and_stops_the_grace_on_top() -> None:
    assert await wrap(0.1, 0.07).run_pod_sandbox(cast(PodSandboxConfig, object())) == "sb"
    await wrap(0.1, 0.02).stop_container("c", 0.2)
    with pytest.raises(RuntimeRequestTimeoutError):
        await wrap(0.3, 0.05).stop_container("c", 0.05)


async def test_image_pulls_are_not_bounded() -> None:
    assert await wrap(0.1, 0.01).pull_image("busybox") == "sha256:x"


async def test_a_timeout_raised_inside_the_call_is_not_mistaken_for_ours() -> None:
    with pytest.raises(TimeoutError, match="the runtime's own timeout"):
        await wrap(0.0, 1.0).image_status("busybox")
