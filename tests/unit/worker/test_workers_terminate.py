from typing import Any, cast

from minikubelet.base.clock import FakeClock
from minikubelet.worker.workers import PodWorker, WorkerContext


class _Ctx:
    clock = FakeClock()


def worker(grace: int) -> PodWorker:
    pod: dict[str, Any] = {"metadata": {"name": "p", "uid": "u"},
                           "spec": {"containers": [], "terminationGracePeriodSeconds": grace}}
    return PodWorker(cast(WorkerContext, _Ctx()), pod)


def test_shorter_grace_given_while_terminating_wins() -> None:
    w = worker(30)
    w.terminate()
    assert w._terminate_grace == 30
    w.terminate(5)
    assert w._terminate_grace == 5
    w.terminate(20)  # a longer grace later does not extend the deadline
    assert w._terminate_grace == 5


def test_deletion_grace_overrides_spec() -> None:
    w = worker(30)
    w.pod["metadata"]["deletionGracePeriodSeconds"] = 3
    w.terminate()
    assert w._terminate_grace == 3 and w.terminating


class _StuckRuntime:
    """A runtime whose stop call takes 40 s of (fake) time: Docker stuck in the kernel."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    async def stop_container(self, cid: str, timeout: float, signal: str = "") -> None:
        self.clock.advance(40)

    async def stop_pod_sandbox(self, sid: str) -> None:
        return None


async def test_exceeded_grace_period_event() -> None:
    from cri.types import ContainerState
    from minikubelet.events import EventRecorder
    from minikubelet.metrics import Metrics
    from minikubelet.runtime.state import PodRuntimeState
    from tests.unit.factories import pod as make_pod
    from tests.unit.factories import running

    clock = FakeClock()
    recorder = EventRecorder(clock, "n")
    ctx = WorkerContext(
        runtime=cast(Any, _StuckRuntime(clock)), clock=clock, recorder=recorder, metrics=Metrics(),
        container_backoff=cast(Any, None), image_backoff=cast(Any, None), root_dir="/nonexistent",
        pod_logs_dir="/nonexistent", host_ip="", publish=lambda _p, _s: None,
    )
    p = make_pod()
    w = PodWorker(ctx, p)
    app = running(p, "app")
    assert app.state is ContainerState.RUNNING
    await w.kill_pod(PodRuntimeState("uid-1", [], [app]), grace=5)
    reasons = [(e["type"], e["reason"], e["message"]) for e in recorder.list()]
    assert ("Normal", "Killing", "Stopping container app") in reasons
    assert ("Warning", "ExceededGracePeriod",
            "Container runtime did not kill the pod within specified grace period.") in reasons
