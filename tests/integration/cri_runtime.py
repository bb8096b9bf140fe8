"""The runtimes under test, bound to the test environment for one test; every sandbox the test made is
removed after it: DockerRuntime on the test engine, RemoteRuntime on the CRI containerd beside it."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from cri.docker import DockerRuntime
from cri.remote import RemoteRuntime
from cri.runtime import Runtime
from tests.images import PAUSE_IMAGE

# Sandboxes carry this label with the test's run id, so teardown removes exactly what the test made.
RUN_LABEL = "minikubelet.test/cri-run"


@pytest.fixture(scope="session")
def cri_endpoint() -> str:
    """unix://…/containerd.sock of the test environment's CRI containerd (`scripts/testenv`)."""
    endpoint = os.environ.get("MKL_TEST_CRI_ENDPOINT", "")
    if not endpoint:
        message = ("MKL_TEST_CRI_ENDPOINT is not set: these tests need the test environment's CRI containerd; "
                   "run them through scripts/test (or `scripts/testenv up` and see docs/containerd.md)")
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return endpoint


async def cleanup(rt: Runtime, run: str) -> None:
    for sandbox in await rt.list_pod_sandboxes({RUN_LABEL: run}):
        await rt.remove_pod_sandbox(sandbox.id)


@pytest.fixture
async def runtime(docker_host: str) -> AsyncIterator[DockerRuntime]:
    rt = DockerRuntime(docker_host, pause_image=PAUSE_IMAGE, sandbox_stop_timeout=2.0)
    await rt.connect()
    rt.test_run = uuid.uuid4().hex  # type: ignore[attr-defined]
    try:
        yield rt
    finally:
        await cleanup(rt, rt.test_run)  # type: ignore[attr-defined]
        await rt.close()


@pytest.fixture
async def remote_runtime(cri_endpoint: str) -> AsyncIterator[RemoteRuntime]:
    rt = RemoteRuntime(cri_endpoint, sandbox_stop_timeout=2.0)
    await rt.connect()
    rt.test_run = uuid.uuid4().hex  # type: ignore[attr-defined]
    try:
        yield rt
    finally:
        await cleanup(rt, rt.test_run)  # type: ignore[attr-defined]
        await rt.close()
