"""Generic fixtures for tests against the real Docker Engine started by ``scripts/testenv up``.

The engine's socket comes from ``MKL_TEST_DOCKER_HOST``; ``scripts/test`` sets it and runs pytest
inside the engine's network namespace, so container IPs are reachable from the test process.
Without it the integration tests skip, except under CI (``CI=true``), where they fail.

Fixtures:
    docker_host       the socket URL (session)
    docker            an ``aiodocker.Docker`` bound to that socket (per test)
    pause_image       the sandbox image name; ``busybox_image``: the general test image
    container_labels  labels to put on every container a test creates; at teardown every
                      container carrying them is force-removed
    start_container   create + start a container with those labels: ``await start_container(config)``
    tmp_root_dir      an empty directory to use as an agent's root dir

Agent-launching fixtures belong in their own modules, not here.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiodocker
import pytest
from aiodocker.containers import DockerContainer

from tests.images import BUSYBOX_IMAGE, PAUSE_IMAGE

RUN_LABEL = "minikubelet.test/run"
TEST_LABEL = "minikubelet.test/test"

StartContainer = Callable[..., Awaitable[DockerContainer]]


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


@pytest.fixture(scope="session")
def docker_host() -> str:
    host = os.environ.get("MKL_TEST_DOCKER_HOST", "")
    if not host:
        message = (
            "MKL_TEST_DOCKER_HOST is not set: the integration tests need the test Docker Engine; "
            "run them through scripts/test (or `scripts/testenv up` and see DEVELOPERS.md)"
        )
        if _under_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return host


@pytest.fixture
async def docker(docker_host: str) -> AsyncIterator[aiodocker.Docker]:
    client = aiodocker.Docker(url=docker_host)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session")
def pause_image() -> str:
    return PAUSE_IMAGE


@pytest.fixture(scope="session")
def busybox_image() -> str:
    return BUSYBOX_IMAGE


@pytest.fixture
async def container_labels(
    docker: aiodocker.Docker, request: pytest.FixtureRequest
) -> AsyncIterator[dict[str, str]]:
    labels = {RUN_LABEL: uuid.uuid4().hex, TEST_LABEL: request.node.nodeid[-200:]}
    yield labels
    leftovers = await docker.containers.list(all=True, filters={"label": [f"{RUN_LABEL}={labels[RUN_LABEL]}"]})
    for container in leftovers:
        try:
            await container.delete(force=True, v=True)
        except aiodocker.DockerError as e:
            if e.status != 404:  # already gone (e.g. AutoRemove) is fine
                raise


@pytest.fixture
def start_container(docker: aiodocker.Docker, container_labels: dict[str, str]) -> StartContainer:
    """``await start_container({"Image": ..., "Cmd": [...], "HostConfig": {...}}, name=None)``.

    Adds the test's labels (removed at teardown), creates and starts the container and returns it.
    """

    async def start(config: dict[str, Any], name: str | None = None) -> DockerContainer:
        config = {**config, "Labels": {**config.get("Labels", {}), **container_labels}}
        container = await docker.containers.create(config, name=name)
        await container.start()
        return container

    return start


@pytest.fixture
def tmp_root_dir(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root
