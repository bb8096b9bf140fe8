"""A DockerRuntime bound to the test engine for one test; every sandbox the test made is removed after it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from cri.docker import DockerRuntime
from tests.images import PAUSE_IMAGE

# Sandboxes carry this label with the test's run id, so teardown removes exactly what the test made.
RUN_LABEL = "minikubelet.test/cri-run"


@pytest.fixture
async def runtime(docker_host: str) -> AsyncIterator[DockerRuntime]:
    rt = DockerRuntime(docker_host, pause_image=PAUSE_IMAGE, sandbox_stop_timeout=2.0)
    await rt.connect()
    rt.test_run = uuid.uuid4().hex  # type: ignore[attr-defined]
    try:
        yield rt
    finally:
        for sandbox in await rt.list_pod_sandboxes({RUN_LABEL: rt.test_run}):  # type: ignore[attr-defined]
            await rt.remove_pod_sandbox(sandbox.id)
        await rt.close()
