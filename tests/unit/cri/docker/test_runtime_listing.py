"""list_containers against a small Engine on a unix socket: the image inspects start from the listing's
ImageID while the container inspects are still out (a pod relist is two Engine round trips, not three),
and a container whose image the listing did not name still gets its image."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import h11
import pytest

from cri.docker.runtime import DockerRuntime
from cri.types import LABEL_CONTAINER_NAME, LABEL_POD_UID, ContainerState
from tests.unit.cri.docker.test_client import json_answer, serving

IMAGE = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def inspect(container_id: str, image: str) -> dict[str, object]:
    return {"Id": container_id, "Name": f"/k8s_{container_id}_p_default_u_0", "Image": image,
            "Created": "2026-11-24T10:00:00.5Z",
            "Config": {"Image": "busybox", "Labels": {LABEL_CONTAINER_NAME: container_id, LABEL_POD_UID: "u"}},
            "State": {"Running": False, "ExitCode": 137, "OOMKilled": True,
                      "StartedAt": "2026-11-24T10:00:01Z", "FinishedAt": "2026-11-24T10:00:02Z"}}


class Listing:
    def __init__(self) -> None:
        self.image_asked = asyncio.Event()
        self.targets: list[str] = []

    async def answer(self, request: h11.Request, body: bytes) -> tuple[int, list[tuple[str, str]], list[bytes]]:
        path = request.target.decode().split("?")[0]
        self.targets.append(path)
        if path.endswith("/version"):
            return json_answer(200, {"ApiVersion": "1.41"})
        if path == "/v1.41/containers/json":
            return json_answer(200, [{"Id": "one", "ImageID": IMAGE}, {"Id": "two", "ImageID": ""}])
        if path == f"/v1.41/images/{IMAGE}/json":
            self.image_asked.set()
            return json_answer(200, {"Id": IMAGE, "RepoTags": ["busybox:1"], "RepoDigests": ["busybox@sha256:" + "c" * 64]})
        if path == f"/v1.41/images/{OTHER}/json":
            return json_answer(200, {"Id": OTHER, "RepoTags": ["other:2"], "RepoDigests": []})
        if path == "/v1.41/containers/one/json":
            # held until the image inspect arrived: with the old order (images after containers) this times out
            try:
                await asyncio.wait_for(self.image_asked.wait(), 5)
            except TimeoutError:
                return json_answer(500, {"message": "the image inspect never came while the container's was out"})
            return json_answer(200, inspect("one", IMAGE))
        if path == "/v1.41/containers/two/json":
            return json_answer(200, inspect("two", OTHER))
        return json_answer(404, {"message": f"no {path}"})


@pytest.fixture
async def listing(tmp_path: Path) -> AsyncIterator[tuple[Listing, DockerRuntime]]:
    state = Listing()
    async with serving(state.answer, tmp_path / "docker.sock"):
        runtime = DockerRuntime(f"unix://{tmp_path}/docker.sock")
        try:
            yield state, runtime
        finally:
            await runtime.close()


async def test_image_inspects_run_beside_the_container_inspects(listing: tuple[Listing, DockerRuntime]) -> None:
    state, runtime = listing
    statuses = {c.id: c for c in await runtime.list_containers({LABEL_POD_UID: "u"})}
    one, two = statuses["one"], statuses["two"]
    assert (one.image, one.image_ref) == ("busybox:1", "docker-pullable://busybox@sha256:" + "c" * 64)
    assert (one.state, one.reason, one.exit_code) == (ContainerState.EXITED, "OOMKilled", 137)
    # "two" was listed without an image id: its image is asked for once its inspect named it
    assert (two.image, two.image_ref) == ("other:2", "docker://" + OTHER)
    assert state.targets.count(f"/v1.41/images/{IMAGE}/json") == 1
    assert state.targets.count(f"/v1.41/images/{OTHER}/json") == 1
