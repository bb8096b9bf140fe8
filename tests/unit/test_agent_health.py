"""/healthz while the runtime is down, as upstream: the runtime counts as down 30 s after its last good check
(the Node says so), but `syncloop` fails only once the sync loop has not run for 5 minutes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cri.errors import RuntimeUnavailableError
from cri.fake import FakeRuntime
from minikubelet.agent import Agent
from minikubelet.base.clock import FakeClock
from minikubelet.config.kubelet_config import KubeletConfig


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_syncloop_fails_five_minutes_after_the_runtime_went_down(tmp_path: Path) -> None:
    clock = FakeClock()
    fake = FakeRuntime(clock)
    agent = Agent(KubeletConfig(root_dir=str(tmp_path), static_pod_path=str(tmp_path / "manifests")), fake,
                  clock=clock)
    clock.advance(1)
    assert dict(await agent.health())["syncloop"] == "sync loop has not run yet"
    await agent.pleg.relist()
    task = asyncio.create_task(agent._runtime_up())
    try:
        await _settle()
        assert await agent.health() == [("ping", None), ("syncloop", None)]
        assert agent.runtime_errors() == ()

        # one failing check every 5 s: 6 + 1 + 59 + 1 of them below, then the runtime answers again
        fake.fail("version", RuntimeUnavailableError("Cannot connect to the Docker daemon"), times=67)
        for _ in range(6):  # 30 s: the last good check is exactly at the threshold, not past it
            clock.advance(5)
            await _settle()
        assert agent.runtime_errors() == ()
        clock.advance(5)
        await _settle()
        assert agent.runtime_errors() == ("container runtime is down",)
        assert dict(await agent.health())["syncloop"] is None

        # the loop was last entered at the last check without errors (30 s after the runtime went away)
        for _ in range(59):
            clock.advance(5)
            await _settle()
        assert dict(await agent.health())["syncloop"] is None
        clock.advance(5)
        await _settle()
        assert dict(await agent.health())["syncloop"] == "sync Loop took longer than expected"
        assert "PLEG is not healthy: pleg was last seen active" in agent.runtime_errors()[1]

        # the runtime back (and the PLEG relisting again): the loop runs, /healthz passes
        await agent.pleg.relist()
        clock.advance(5)
        await _settle()
        assert agent.runtime_errors() == ()
        assert await agent.health() == [("ping", None), ("syncloop", None)]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_runtime_answering_again_syncs_every_pod_at_once(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """upstream's syncLoop resumes once the runtime answers: the pods whose syncs failed meanwhile sync now, not
    at the end of their podWorkers back-off."""
    clock = FakeClock()
    fake = FakeRuntime(clock)
    agent = Agent(KubeletConfig(root_dir=str(tmp_path), static_pod_path=str(tmp_path / "manifests")), fake,
                  clock=clock)
    woken: list[bool] = []
    monkeypatch.setattr(agent.workers, "wake_all", lambda urgent=False: woken.append(urgent))
    task = asyncio.create_task(agent._runtime_up())
    try:
        await _settle()
        fake.fail("version", RuntimeUnavailableError("Cannot connect to the Docker daemon"), times=2)
        for _ in range(2):
            clock.advance(5)
            await _settle()
        assert woken == []
        clock.advance(5)
        await _settle()
        assert woken == [True]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
