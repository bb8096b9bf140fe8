"""The shutdown manager's pod killing, on the injectable clock: groups in order, each within its share."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import ShutdownGracePeriodByPodPriority as P
from minikubelet.nodeshutdown.groups import SYSTEM_CRITICAL_PRIORITY
from minikubelet.nodeshutdown.logind import Logind
from minikubelet.nodeshutdown.manager import NodeShutdownManager
from minikubelet.worker.lifecycle import PodStatusFn


def _pod(name: str, priority: int = 0, grace: int | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [], "priority": priority}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec}


class Kills:
    def __init__(self, clock: FakeClock, stops_after: dict[str, float]) -> None:
        self.clock = clock
        self.stops_after = stops_after  # name -> seconds the pod takes to stop (absent: never)
        self.log: list[tuple[float, str, int]] = []
        self.pod_events: list[tuple[str, str]] = []
        self.tasks: list[asyncio.Task[None]] = []

    def kill(self, pod: Pod, grace: int, status_fn: PodStatusFn) -> asyncio.Event:
        name = pod["metadata"]["name"]
        self.log.append((self.clock.monotonic(), name, grace))
        done = asyncio.Event()
        if name in self.stops_after:
            async def stop() -> None:
                await self.clock.sleep(self.stops_after[name])
                done.set()
            self.tasks.append(asyncio.create_task(stop()))
        return done

    def manager(self, periods: list[P], pods: list[Pod] | None = None,
                written: Callable[[Sequence[Pod]], bool] = lambda _p: True) -> NodeShutdownManager:
        async def no_bus() -> Logind:
            raise OSError("no bus in a unit test")

        return NodeShutdownManager(periods, self.clock, lambda: list(pods or []), self.kill, lambda _t, _r, _m: None,
                                   lambda p, _t, r, _m: self.pod_events.append((p["metadata"]["name"], r)),
                                   lambda: None, no_bus, written)


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _advance(clock: FakeClock, seconds: float) -> None:
    for _ in range(int(seconds * 10)):
        clock.advance(0.1)
        await _settle()


async def test_the_next_group_waits_for_the_previous_groups_share() -> None:
    clock = FakeClock()
    kills = Kills(clock, {"dns": 1})  # "web" ignores its stop signal
    m = kills.manager([P(0, 20), P(SYSTEM_CRITICAL_PRIORITY, 10)])
    job = asyncio.create_task(m.kill_pods([_pod("web", grace=60), _pod("dns", SYSTEM_CRITICAL_PRIORITY)]))
    await _settle()
    assert kills.log == [(0.0, "web", 20)]  # the group's share, shorter than the pod's own 60 s
    await _advance(clock, 19.5)
    assert [n for _, n, _ in kills.log] == ["web"]
    await _advance(clock, 0.6)
    assert [(n, g) for _, n, g in kills.log] == [("web", 20), ("dns", 10)]
    assert 20.0 <= kills.log[1][0] < 20.2
    await _advance(clock, 1.2)
    assert job.done()  # the critical pod stopped after 1 s: no waiting for the rest of its 10 s
    # the stuck pod's kill gives up after 1.5 times its grace (30 s) with upstream's event
    assert kills.pod_events == []
    await _advance(clock, 9)
    assert kills.pod_events == [("web", "ExceededGracePeriod")]
    await asyncio.gather(*kills.tasks)


async def test_a_group_done_early_lets_the_next_start_at_once_and_empty_groups_cost_nothing() -> None:
    clock = FakeClock()
    kills = Kills(clock, {"a": 2, "b": 3, "c": 1})
    m = kills.manager([P(0, 30), P(1000, 30), P(5000, 30), P(SYSTEM_CRITICAL_PRIORITY, 30)])
    job = asyncio.create_task(m.kill_pods([_pod("a", 0), _pod("b", 10, grace=5), _pod("c", SYSTEM_CRITICAL_PRIORITY)]))
    await _settle()
    await _advance(clock, 6.5)
    assert job.done()
    # a and b: the lowest group (b's priority 10 is below the next group's 1000); c once b stopped at 3 s
    assert [(n, g) for _, n, g in kills.log] == [("a", 30), ("b", 5), ("c", 30)]
    assert kills.log[0][0] == kills.log[1][0] == 0.0 and 3.0 <= kills.log[2][0] < 3.2
    await asyncio.gather(*kills.tasks)


async def test_admission_and_ready_follow_the_shutdown_state() -> None:
    m = Kills(FakeClock(), {}).manager([P(0, 10)])
    assert m.admit(_pod("x"), []).admit and m.errors() == ()
    m.shutting_down = True
    result = m.admit(_pod("x"), [])
    assert (result.admit, result.reason, result.message) == (False, "NodeShutdown",
                                                            "Pod was rejected as the node is shutting down.")
    assert m.errors() == ("node is shutting down",)


async def test_the_lock_waits_for_the_statuses_to_reach_the_api_within_the_grace() -> None:
    clock = FakeClock()
    kills = Kills(clock, {"web": 1})
    written = {"web": False}
    m = kills.manager([P(0, 20), P(SYSTEM_CRITICAL_PRIORITY, 10)], [_pod("web")],
                      lambda pods: all(written[p["metadata"]["name"]] for p in pods))
    job = asyncio.create_task(m.process_shutdown())
    await _settle()
    await _advance(clock, 3)
    assert not m.processed.is_set()  # the pod stopped at 1 s, its status is not in the API yet
    written["web"] = True
    await _advance(clock, 0.2)
    assert m.processed.is_set() and job.done()
    await asyncio.gather(*kills.tasks)

    # never written: released anyway once the whole grace (30 s) is used up
    clock2 = FakeClock()
    kills2 = Kills(clock2, {"web": 1})
    m2 = kills2.manager([P(0, 20), P(SYSTEM_CRITICAL_PRIORITY, 10)], [_pod("web")], lambda _pods: False)
    job2 = asyncio.create_task(m2.process_shutdown())
    await _settle()
    await _advance(clock2, 29.5)
    assert not m2.processed.is_set()
    await _advance(clock2, 0.7)
    assert m2.processed.is_set() and job2.done()
    await asyncio.gather(*kills2.tasks)
