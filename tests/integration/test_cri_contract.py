"""The runtime contract (tests/cri_contract.py) on the real runtimes, in real time: DockerRuntime against
the test engine, RemoteRuntime (CRI v1 gRPC) against the test environment's CRI containerd."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace

import pytest

from cri.docker import DockerRuntime
from cri.remote import RemoteRuntime
from cri.runtime import Runtime
from cri.types import ContainerConfig, ContainerMeta, ContainerStatus
from tests import cri_contract
from tests.images import BUSYBOX_IMAGE
from tests.integration import cri_runtime
from tests.integration.cri_runtime import RUN_LABEL

pytestmark = pytest.mark.integration
runtime = cri_runtime.runtime
remote_runtime = cri_runtime.remote_runtime
cri_endpoint = cri_runtime.cri_endpoint


class RealBackend:
    """Containers are busybox shell scripts; time is the wall clock."""

    def __init__(self, rt: Runtime) -> None:
        self.runtime = rt
        self.run_labels = {RUN_LABEL: rt.test_run}  # type: ignore[attr-defined]

    @staticmethod
    def _config(name: str, script: str, overrides: dict[str, object]) -> ContainerConfig:
        config = ContainerConfig(ContainerMeta(name), BUSYBOX_IMAGE, command=("sh", "-c", script))
        return replace(config, **overrides)  # type: ignore[arg-type]

    def sleeper(self, name: str, *, ignore_term: bool = False, **overrides: object) -> ContainerConfig:
        trap = "trap '' TERM" if ignore_term else "trap 'exit 143' TERM"
        return self._config(name, f"{trap}; while true; do sleep 0.1; done", overrides)

    def exits(self, name: str, code: int, **overrides: object) -> ContainerConfig:
        return self._config(name, f"exit {code}", overrides)

    async def settle(self) -> None:
        await asyncio.sleep(0.5)  # shells install their traps; the event stream is subscribed

    async def stop_timed(self, container_id: str, timeout: float) -> float:
        start = time.monotonic()
        await self.runtime.stop_container(container_id, timeout)
        return time.monotonic() - start

    def pid_namespace(self, status: ContainerStatus) -> str:
        return os.readlink(f"/proc/{status.pid}/ns/pid")


@pytest.mark.parametrize("check", sorted(cri_contract.CHECKS))
async def test_docker_runtime_contract(runtime: DockerRuntime, check: str) -> None:
    await cri_contract.CHECKS[check](RealBackend(runtime))


@pytest.mark.parametrize("check", sorted(cri_contract.CHECKS))
async def test_containerd_runtime_contract(remote_runtime: RemoteRuntime, check: str) -> None:
    await cri_contract.CHECKS[check](RealBackend(remote_runtime))
