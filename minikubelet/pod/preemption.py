"""Critical pods (upstream pkg/kubelet/preemption): a critical pod refused only for lack of resources is
admitted after evicting enough other pods, chosen by QoS class and by how closely their requests cover
what is missing. Static and mirror pods are critical, and so is any pod of priority >= 2000000000.

Only pods the critical pod may preempt are candidates (a non-critical pod, or a lower priority when
both pods have one), so a static pod never preempts another static pod without explicit priorities.
Victim selection is pure; the eviction itself is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cgroups.qos import qos_class
from minikubelet.base.podview import PodView
from minikubelet.pod.admission_fit import PODS, InsufficientResource, pod_request_units

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

PREEMPT_REASON = "Preempting"
PREEMPT_MESSAGE = "Preempted in order to admit critical pod"
PREEMPT_CONDITION_MESSAGE = "Pod was preempted by Kubelet to accommodate a critical pod."


def is_static(pod: PodView) -> bool:
    source = pod.annotations.get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_critical(pod: PodView) -> bool:
    return (is_static(pod) or CONFIG_MIRROR_ANNOTATION in pod.annotations
            or (pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY))


def preemptable(preemptor: PodView, preemptee: PodView) -> bool:
    if is_critical(preemptor) and not is_critical(preemptee):
        return True
    if preemptor.priority is not None and preemptee.priority is not None:
        return preemptor.priority > preemptee.priority
    return False


def preempted_status_fn(now: str) -> Callable[[dict[str, Any]], None]:
    """The terminal status of a preempted pod: Failed/Preempting and a DisruptionTarget condition."""

    def apply(status: dict[str, Any]) -> None:
        status["phase"] = "Failed"
        status["reason"] = PREEMPT_REASON
        status["message"] = PREEMPT_MESSAGE
        conditions = [c for c in status.get("conditions", []) if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": now, "reason": "TerminationByKubelet",
                           "message": PREEMPT_CONDITION_MESSAGE})
        status["conditions"] = conditions

    return apply


@dataclass(frozen=True)
class Requirement:
    resource: str
    quantity: int


def _request(pod: PodView, resource: str) -> int:
    return 1 if resource == PODS else pod_request_units(pod).get(resource, 0)


def _subtract(reqs: Sequence[Requirement], pods: Sequence[PodView]) -> list[Requirement]:
    out: list[Requirement] = []
    for r in reqs:
        left = r.quantity
        for p in pods:
            left -= _request(p, r.resource)
            if left <= 0:
                break
        if left > 0:
            out.append(Requirement(r.resource, left))
    return out


def _format(reqs: Sequence[Requirement]) -> str:
    return "[" + "".join(f"(res: {r.resource}, q: {r.quantity}), " for r in reqs) + "]"


class PreemptionError(Exception):
    pass


def _distance(reqs: Sequence[Requirement], pod: PodView) -> float:
    d = 0.0
    for r in reqs:
        remaining = r.quantity - _request(pod, r.resource)
        if remaining > 0:
            d += (remaining / r.quantity) ** 2
    return d


def _smaller_request(a: PodView, b: PodView) -> bool:
    for resource in ("memory", "cpu"):
        ra, rb = _request(a, resource), _request(b, resource)
        if ra != rb:
            return ra < rb
    return True


def _by_distance(pods: Sequence[PodView], reqs: list[Requirement]) -> list[PodView]:
    left = list(pods)
    chosen: list[PodView] = []
    while reqs:
        if not left:
            raise PreemptionError(f"no set of running pods found to reclaim resources: {_format(reqs)}")
        best, best_d = 0, float(len(reqs) + 1)
        for i, p in enumerate(left):
            d = _distance(reqs, p)
            if d < best_d or (d == best_d and _smaller_request(p, left[best])):
                best, best_d = i, d
        victim = left[best]
        reqs = _subtract(reqs, [victim])
        chosen.append(victim)
        left[best] = left[-1]
        left.pop()
    return chosen


def pods_to_preempt(pod: PodView, admitted: Sequence[PodView],
                    insufficient: Sequence[InsufficientResource]) -> list[PodView]:
    """getPodsToPreempt: the fewest best-effort, then burstable, then guaranteed pods freeing what is missing.

    Raises PreemptionError (upstream's message) when no such set exists.
    """
    reqs = [Requirement(r.resource, r.shortfall) for r in insufficient]
    classes: dict[str, list[PodView]] = {"BestEffort": [], "Burstable": [], "Guaranteed": []}
    for p in admitted:
        if preemptable(pod, p):
            classes[qos_class(p)].append(p)
    best_effort, burstable, guaranteed = classes["BestEffort"], classes["Burstable"], classes["Guaranteed"]
    unmet = _subtract(reqs, [*best_effort, *burstable, *guaranteed])
    if unmet:
        raise PreemptionError(f"no set of running pods found to reclaim resources: {_format(unmet)}")
    g = _by_distance(guaranteed, _subtract(reqs, [*best_effort, *burstable]))
    b = _by_distance(burstable, _subtract(reqs, [*best_effort, *g]))
    be = _by_distance(best_effort, _subtract(reqs, [*b, *g]))
    return [*be, *b, *g]
