"""Issue 17 item 2: image garbage collection against the real Docker Engine (real images, containers and
removals; the image filesystem's real capacity and free space; ages on the fake clock).

The engine is shared by every test, so the collector is shown only the images this test builds plus the
pause image (`ScopedImages`): the busybox and other test images must survive. With the thresholds at 1 % and
0 % the collector must free every used byte of the real image filesystem, more than the test images hold,
however full the shared disk is and whatever else frees space on it meanwhile: it removes every eligible image, least recently used first, keeps the image in use, the pause
image and the image younger than imageMinimumGCAge, and reports FreeDiskSpaceFailed.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiodocker
import pytest

from cri.docker import DockerRuntime
from cri.types import ContainerConfig, ContainerMeta, Image, PodMeta, PodSandboxConfig
from minikubelet.base.clock import FakeClock
from minikubelet.worker.image_gc import ImageGC, ImageGCError, ImageGCPolicy
from tests.images import BUSYBOX_IMAGE, PAUSE_IMAGE
from tests.integration import cri_runtime
from tests.integration.cri_runtime import RUN_LABEL

pytestmark = pytest.mark.integration
runtime = cri_runtime.runtime


class ScopedImages:
    """The real runtime, listing only the images this test may lose (and the pause image)."""

    def __init__(self, rt: DockerRuntime, prefix: str) -> None:
        self.rt = rt
        self.prefix = prefix

    async def list_images(self) -> list[Image]:
        return [i for i in await self.rt.list_images()
                if any(t.startswith(self.prefix) or t == PAUSE_IMAGE for t in i.repo_tags)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rt, name)


@pytest.fixture
async def test_images(docker: aiodocker.Docker) -> AsyncIterator[str]:
    prefix = f"minikubelet.test/gc-{uuid.uuid4().hex[:8]}:"
    try:
        yield prefix
    finally:
        mine = [i["Id"] for i in await docker.images.list() if any(
            t.startswith(prefix) for t in i.get("RepoTags") or [])]
        for c in await docker.containers.list(all=True):
            if c._container.get("ImageID") in mine:
                await c.delete(force=True)
        for image_id in mine:
            try:
                await docker.images.delete(image_id, force=True)
            except aiodocker.DockerError:
                pass


async def build(docker: aiodocker.Docker, prefix: str, name: str) -> str:
    """A small image of its own: busybox plus one file, committed from a container."""
    c = await docker.containers.create({"Image": BUSYBOX_IMAGE, "Cmd": ["sh", "-c", f"echo {name} > /id"]})
    try:
        await c.start()
        await c.wait()
        await c.commit(repository=prefix.rstrip(":"), tag=name)
    finally:
        await c.delete(force=True)
    info = await docker.images.inspect(f"{prefix}{name}")
    return str(info["Id"])


async def test_unused_images_go_least_recently_used_first(
        test_images: str, runtime: DockerRuntime, docker: aiodocker.Docker) -> None:
    # test_images first: its teardown (removing the images) follows the runtime's (removing the containers)
    prefix = test_images
    ids = {n: await build(docker, prefix, n) for n in ("used", "old", "never1", "never2")}
    root = (await runtime.runtime_config()).image_fs_path
    events: list[tuple[str, str, str]] = []

    async def image_fs() -> tuple[int, int]:
        s = os.statvfs(root)
        return s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize

    clock = FakeClock()
    gc = ImageGC(ScopedImages(runtime, prefix), clock,
                 ImageGCPolicy(high_threshold_percent=1, low_threshold_percent=0, min_age=60), PAUSE_IMAGE, image_fs, lambda t, r, m: events.append((t, r, m)))
    uid = str(uuid.uuid4())
    pod = PodSandboxConfig(PodMeta("gc", "default", uid, 0), labels={RUN_LABEL: runtime.test_run})  # type: ignore[attr-defined]
    sandbox = await runtime.run_pod_sandbox(pod)

    async def run(name: str, attempt: int) -> str:
        cid = await runtime.create_container(sandbox, ContainerConfig(
            ContainerMeta(name, attempt), f"{prefix}{name}", command=("sleep", "100000")), pod)
        await runtime.start_container(cid)
        return cid

    old = await run("old", 0)
    with pytest.raises(ImageGCError):  # t=0: everything was just detected, nothing may go yet
        await gc.garbage_collect()
    assert gc.removed == []
    await runtime.stop_container(old, 0)
    await runtime.remove_container(old)
    clock.advance(30)
    await run("used", 0)
    ids["young"] = await build(docker, prefix, "young")
    with pytest.raises(ImageGCError):
        await gc.garbage_collect()  # t=30: `old` last used at 0, `used` in use, `young` first seen now
    assert gc.removed == []
    clock.advance(31)
    with pytest.raises(ImageGCError) as failed:
        await gc.garbage_collect()
    # never used first (in detection order), then the least recently used; the rest stay
    assert set(gc.removed[:2]) == {ids["never1"], ids["never2"]} and gc.removed[2:] == [ids["old"]]
    left = {t for i in await docker.images.list() for t in i.get("RepoTags") or []}
    assert {f"{prefix}used", f"{prefix}young", PAUSE_IMAGE, BUSYBOX_IMAGE} <= left
    assert not {f"{prefix}old", f"{prefix}never1", f"{prefix}never2"} & left
    message = str(failed.value)
    assert re.fullmatch(r"Insufficient free disk space on the node's image filesystem \(\d+% of \d+\.\d [KMGT]iB "
                        r"used\)\. Failed to free sufficient space by deleting unused images \(freed \d+ bytes\)\. "
                        r"Investigate disk usage, as it could be used by active images, logs, volumes, or other "
                        r"data\.", message), message
    assert events[-1] == ("Warning", "FreeDiskSpaceFailed", message)
