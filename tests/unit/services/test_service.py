"""The node services' group: started in order, their loops run together, stopped in reverse (controller-runtime's
Manager and Runnables)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from minikubelet.services.service import Loop, Service, ServiceGroup


class Recorded(Service):
    def __init__(self, name: str, log: list[str], *, fail_start: bool = False, fail_stop: bool = False) -> None:
        self.name = name
        self._log = log
        self._fail_start = fail_start
        self._fail_stop = fail_stop

    async def start(self) -> None:
        self._log.append(f"start {self.name}")
        if self._fail_start:
            raise RuntimeError(f"{self.name} cannot start")

    def loops(self) -> Sequence[Loop]:
        return [(f"{self.name}-loop", self._loop)]

    async def _loop(self) -> None:
        self._log.append(f"loop {self.name}")
        await asyncio.Event().wait()

    async def stop(self) -> None:
        self._log.append(f"stop {self.name}")
        if self._fail_stop:
            raise RuntimeError(f"{self.name} cannot stop")


async def test_started_in_order_run_together_and_stopped_in_reverse() -> None:
    log: list[str] = []
    group = ServiceGroup()
    await group.start(Recorded("a", log), Recorded("b", log))
    await group.start(Recorded("c", log))
    stop = asyncio.Event()
    stopping: list[str] = []
    run = asyncio.create_task(group.run(stop, on_stop=lambda: stopping.append("stopping")))
    for _ in range(5):
        await asyncio.sleep(0)
    assert sorted(e for e in log if e.startswith("loop")) == ["loop a", "loop b", "loop c"]
    stop.set()
    await run  # every loop cancelled, none left pending
    assert stopping == ["stopping"]
    await group.stop()
    assert [e for e in log if not e.startswith("loop")] == [
        "start a", "start b", "start c", "stop c", "stop b", "stop a"]
    assert group.started == []


async def test_a_failed_start_stops_what_started_including_itself() -> None:
    log: list[str] = []
    group = ServiceGroup()
    with pytest.raises(RuntimeError, match="b cannot start"):
        await group.start(Recorded("a", log), Recorded("b", log, fail_start=True), Recorded("c", log))
    await group.stop()
    assert log == ["start a", "start b", "stop b", "stop a"]


async def test_one_service_failing_to_stop_does_not_keep_the_others_running(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    group = ServiceGroup()
    await group.start(Recorded("a", log), Recorded("b", log, fail_stop=True))
    await group.stop()
    assert log == ["start a", "start b", "stop b", "stop a"]
    assert "stopping a node service failed" in caplog.text


async def test_a_failing_loop_ends_the_run() -> None:
    class Broken(Service):
        name = "broken"

        def loops(self) -> Sequence[Loop]:
            return [("broken", self._fail)]

        async def _fail(self) -> None:
            raise ValueError("loop broke")

    log: list[str] = []
    group = ServiceGroup()
    await group.start(Recorded("a", log), Broken())
    with pytest.raises(ExceptionGroup):
        await group.run(asyncio.Event())
    await group.stop()
    assert log[-1] == "stop a"
