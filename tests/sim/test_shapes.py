"""The simulator's pod shapes, pressure and node shutdown (tests/sim/shapes.py, pressure.py, shutdown.py): each is
exercised by the workload, each invariant catches what it states. docs/testing.md, "Deterministic simulation"."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import pytest

from cri.fake import _Object
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.events import EventRecorder
from minikubelet.eviction.manager import EvictionManager
from minikubelet.nodeshutdown.manager import NodeShutdownManager
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.workers import PodWorkers
from tests.sim.pressure import Machine
from tests.sim.run import run_seed, run_trace
from tests.sim.shape_checks import ShapeChecker
from tests.sim.workload import Event

API_POD = 2  # decorated shape 2: one API pod (evictable), one `run` container, BestEffort
LOW, HIGH = 46, 789  # decorated shapes: static pods of priority 0 (group 0, 10 s) and 1000 (group 1000, 20 s)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.CRITICAL)  # the agent's warnings under injected faults are expected
    yield
    root.setLevel(level)


def test_the_workload_reaches_every_shape_and_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: Counter[str] = Counter()
    evict, on_stop = ShapeChecker.evict, ShapeChecker._on_stop

    def counting_evict(self: ShapeChecker, pod: Pod, how: str) -> None:
        seen[how] += 1
        evict(self, pod, how)

    def counting_stop(self: ShapeChecker, obj: _Object, timeout: float) -> None:
        seen["liveness-kill"] += bool(self.script.liveness_failing.get(obj.id))
        seen["sidecar-stop"] += obj.container.name.startswith("side-")
        on_stop(self, obj, timeout)

    monkeypatch.setattr(ShapeChecker, "evict", counting_evict)
    monkeypatch.setattr(ShapeChecker, "_on_stop", counting_stop)
    process = NodeShutdownManager.process_shutdown

    async def counting_shutdown(self: NodeShutdownManager) -> None:
        seen["shutdown"] += 1
        await process(self)

    monkeypatch.setattr(NodeShutdownManager, "process_shutdown", counting_shutdown)
    for seed in range(12):
        out = run_seed(seed, 100)
        assert out.violation is None, (seed, out.violation)
    assert all(seen[k] > 0 for k in ("evicted", "preempted", "liveness-kill", "sidecar-stop", "shutdown")), seen


def test_an_api_pod_under_memory_pressure_is_evicted_and_ends_failed() -> None:
    out = run_trace(0, [Event("create", API_POD, 1, 5.0), Event("pressure", 0, 2, 60.0), Event("pressure", 0, 0, 60.0)])
    assert out.violation is None, out.violation
    # evicted at once (grace 0 for a hard threshold): nothing of it runs after the pressure step
    assert out.log[3].split(" [")[1].startswith("]") and "('uid-0', 'Failed')" in out.log[3]


def test_an_eviction_that_leaves_the_pod_running_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # the invariant is not vacuous: an eviction whose kill is lost (the pod runs on, its phase never Failed)
    from tests.sim import pressure

    real = pressure.eviction_manager

    def losing(machine: Machine, clock: FakeClock, recorder: EventRecorder, workers: PodWorkers,
               active_pods: Callable[[], Sequence[Pod]], gc: ContainerGC,
               evicted: Callable[[Pod], None]) -> EvictionManager:
        manager = real(machine, clock, recorder, workers, active_pods, gc, evicted)
        manager._kill = lambda pod, _grace, _status_fn: evicted(pod)
        return manager

    monkeypatch.setattr("tests.sim.node.eviction_manager", losing)
    out = run_trace(0, [Event("create", API_POD, 1, 5.0), Event("pressure", 0, 2, 60.0), Event("wait", 0, 0, 200.0)])
    assert out.violation is not None and out.violation.name == "eviction-terminal", out.violation


def test_node_shutdown_stops_the_lower_priority_group_first() -> None:
    out = run_trace(0, [Event("create", LOW, 1, 5.0), Event("create", HIGH, 1, 5.0), Event("shutdown", 0, 0, 40.0),
                        Event("wait", 0, 0, 5.0)])
    assert out.violation is None, out.violation


def test_a_shutdown_that_ignores_the_priority_groups_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    async def all_at_once(self: NodeShutdownManager, pods: list[Pod]) -> None:
        for pod in reversed(pods):
            self.kill_pod(pod, 1, lambda _s: None)
        await self.clock.sleep(5)

    monkeypatch.setattr(NodeShutdownManager, "kill_pods", all_at_once)
    out = run_trace(0, [Event("create", LOW, 1, 5.0), Event("create", HIGH, 1, 5.0), Event("shutdown", 0, 0, 40.0)])
    assert out.violation is not None and out.violation.name == "shutdown-order", out.violation
