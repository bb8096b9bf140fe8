from typing import Any, cast

from minikubelet.clock import FakeClock
from minikubelet.pod_worker import PodWorker, WorkerContext


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
