"""Pod admission (upstream pkg/kubelet/lifecycle): each handler may refuse a pod with a reason and a message.

Pure: handlers see the pod and the pods already admitted, never the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from minikubelet.base.podview import Pod


@dataclass(frozen=True)
class PodAdmitResult:
    admit: bool
    reason: str = ""
    message: str = ""
    # Refused only because the Node's labels did not match: upstream reads the Node again from the API
    # server (getNodeSync) and checks once more before it gives up, in case a label was just added.
    refetch_node: bool = field(default=False, compare=False)
    # the refusal's evidence as fields (`explain`): the predicate and its numbers, the taint, the unmatched term
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # admitted by preempting these pods (a critical pod): it runs only once they have stopped, as upstream's
    # admission blocks in killPodNow until each victim's worker has terminated it
    victims: tuple[Pod, ...] = field(default=(), compare=False)


ADMIT = PodAdmitResult(True)


class PodAdmitHandler(Protocol):
    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult: ...


class MaxPodsAdmitHandler:
    """The `pods` resource of the node: at most maxPods active pods."""

    def __init__(self, max_pods: int) -> None:
        self.max_pods = max_pods

    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
        used = len(admitted)
        if used < self.max_pods:
            return ADMIT
        return PodAdmitResult(
            False, "OutOfpods",
            f"Node didn't have enough resource: pods, requested: 1, used: {used}, capacity: {self.max_pods}",
        )


def can_admit_pod(handlers: Sequence[PodAdmitHandler], pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
    """The first refusal wins, as the kubelet's canAdmitPod. An admission that preempts names its victims; a
    later handler's refusal leaves them running (upstream's handler would have killed them already)."""
    victims: tuple[Pod, ...] = ()
    for h in handlers:
        result = h.admit(pod, admitted)
        if not result.admit:
            return result
        victims += result.victims
    return replace(ADMIT, victims=victims) if victims else ADMIT
