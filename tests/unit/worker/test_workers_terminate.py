from __future__ import annotations

from typing import Any, cast

from cri.types import ContainerState
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import PodView
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.status.manager import StatusManager
from minikubelet.worker.containers import Containers
from minikubelet.worker.lifecycle import KillPodOptions
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorker
from tests.unit.factories import pod as make_pod
from tests.unit.factories import running


def worker(grace: int, deletion_grace: int | None = None) -> PodWorker:
    pod: dict[str, Any] = {"metadata": {"name": "p", "uid": "u"},
                           "spec": {"containers": [], "terminationGracePeriodSeconds": grace}}
    if deletion_grace is not None:
        pod["metadata"]["deletionGracePeriodSeconds"] = deletion_grace
    return PodWorker(pod, cast(PodSyncer, None), FakeClock(), Metrics())


def test_shorter_grace_given_while_terminating_wins() -> None:
    w = worker(30)
    w.kill()
    assert w._grace == 30 and w.terminating
    w.kill(KillPodOptions(grace_override=5))
    assert w._grace == 5
    w.kill(KillPodOptions(grace_override=20))  # a longer grace later does not extend the deadline
    assert w._grace == 5


def test_deletion_grace_overrides_spec() -> None:
    w = worker(30, deletion_grace=3)
    w.remove()
    assert w._grace == 3 and w.terminating and w.removed


class _StuckRuntime:
    """A runtime whose stop call takes 40 s of (fake) time: Docker stuck in the kernel."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    async def stop_container(self, cid: str, timeout: float, signal: str = "") -> None:
        self.clock.advance(40)

    async def stop_pod_sandbox(self, sid: str) -> None:
        return None


async def test_exceeded_grace_period_event() -> None:
    clock = FakeClock()
    recorder = EventRecorder(clock, "n")
    runtime = cast(Any, _StuckRuntime(clock))
    containers = Containers(runtime, clock, recorder, Metrics(), cast(Any, None), cast(Any, None), None,
                            "/nonexistent", "/nonexistent", "")
    syncer = PodSyncer(runtime, clock, recorder, Metrics(), containers, cast(Any, None), cast(Any, None),
                       StatusManager(), None, "/nonexistent", "")
    p = make_pod()
    app = running(p, "app")
    assert app.state is ContainerState.RUNNING
    await syncer.kill_pod(PodView.of(p), PodRuntimeState("uid-1", [], [app]), grace=5)
    reasons = [(e["type"], e["reason"], e["message"]) for e in recorder.list()]
    assert ("Normal", "Killing", "Stopping container app") in reasons
    assert ("Warning", "ExceededGracePeriod",
            "Container runtime did not kill the pod within specified grace period.") in reasons
