from __future__ import annotations

from typing import Any

from minikubelet.pod.admission import ADMIT, MaxPodsAdmitHandler, PodAdmitResult, can_admit_pod


def pod(n: int) -> dict[str, Any]:
    return {"metadata": {"name": f"p{n}", "uid": str(n)}, "spec": {"containers": []}}


def test_max_pods_refuses_with_the_kubelets_reason_and_message() -> None:
    h = MaxPodsAdmitHandler(2)
    assert h.admit(pod(0), [pod(1)]) == ADMIT
    r = h.admit(pod(0), [pod(1), pod(2)])
    assert r == PodAdmitResult(False, "OutOfpods",
                               "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")


class _Refuse:
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.calls = 0

    def admit(self, pod: dict[str, Any], admitted: Any) -> PodAdmitResult:
        self.calls += 1
        return PodAdmitResult(False, self.reason, "no")


def test_first_refusal_wins() -> None:
    first, second = _Refuse("A"), _Refuse("B")
    assert can_admit_pod([MaxPodsAdmitHandler(10), first, second], pod(0), []).reason == "A"
    assert second.calls == 0
    assert can_admit_pod([], pod(0), []) == ADMIT
