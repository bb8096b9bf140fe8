"""The runtime contract (tests/cri_contract.py) on the fake runtime, with a fake clock."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from cri.fake import FakeRuntime, Program
from cri.types import ContainerConfig, ContainerMeta, ContainerStatus
from minikubelet.base.clock import FakeClock
from tests import cri_contract

BUSYBOX = "minikubelet.test/busybox:1.36"


class FakeBackend:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.fake = FakeRuntime(self.clock, images=[BUSYBOX])
        self.runtime = self.fake
        self.run_labels = {"minikubelet.test/cri-run": "fake"}

    def _config(self, name: str, program: Program, overrides: dict[str, object]) -> ContainerConfig:
        self.fake.program(name, program)
        return replace(ContainerConfig(ContainerMeta(name), BUSYBOX), **overrides)  # type: ignore[arg-type]

    def sleeper(self, name: str, *, ignore_term: bool = False, **overrides: object) -> ContainerConfig:
        return self._config(name, Program(ignore_stop_signal=ignore_term), overrides)

    def exits(self, name: str, code: int, **overrides: object) -> ContainerConfig:
        return self._config(name, Program(exit_on_start=code), overrides)

    async def settle(self) -> None:
        for _ in range(10):
            await asyncio.sleep(0)

    async def stop_timed(self, container_id: str, timeout: float) -> float:
        start = self.clock.monotonic()
        stop = asyncio.create_task(self.fake.stop_container(container_id, timeout))
        await self.settle()
        while not stop.done():
            self.clock.advance(0.1)
            await self.settle()
        await stop
        return self.clock.monotonic() - start

    def pid_namespace(self, status: ContainerStatus) -> str:
        return self.fake.pid_namespace(status.id)


@pytest.mark.parametrize("check", sorted(cri_contract.CHECKS))
async def test_fake_runtime_contract(check: str) -> None:
    await cri_contract.CHECKS[check](FakeBackend())
