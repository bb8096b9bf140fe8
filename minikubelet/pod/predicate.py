"""The kubelet's predicate admit handler (pkg/kubelet/lifecycle/predicate.go): OS checks, then the scheduler's
GeneralPredicates the kubelet repeats (resource fit, node affinity, node name, host ports), then NoExecute
taints. All failures are gathered and the first one is reported, with upstream's reason and message.

A critical pod (static, mirror, or system priority) refused only for lack of resources is admitted with the
pods it may preempt named in the result (`victims`): the pod manager kills them and admits the pod once they
have stopped. When no such set exists it is refused as upstream does, with UnexpectedAdmissionError. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from minikubelet.base.podview import Pod, PodView
from minikubelet.metrics import Metrics
from minikubelet.node.labels import LABEL_OS, NODE_OS, Node
from minikubelet.pod.admission import ADMIT, PodAdmitResult
from minikubelet.pod.admission_fit import (
    PODS,
    InsufficientResource,
    admitting_pod_request_units,
    fits_request,
    host_ports,
    pod_request_units,
    ports_conflict,
    sum_units,
    to_units,
)
from minikubelet.pod.node_affinity import node_affinity_mismatch, required_node_affinity_matches
from minikubelet.pod.preemption import PreemptionError, is_critical, is_static, pods_to_preempt
from minikubelet.pod.tolerations import find_untolerated_taint

# Reasons of predicate.go.
POD_OS_SELECTOR_MISMATCH = "PodOSSelectorNodeLabelDoesNotMatch"
POD_OS_NOT_SUPPORTED = "PodOSNotSupported"
SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED = "SupplementalGroupsPolicyNotSupported"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"

# Scheduler plugin names and their failure descriptions.
NODE_AFFINITY = ("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")
NODE_NAME = ("NodeName", "node(s) didn't match the requested node name")
NODE_PORTS = ("NodePorts", "node(s) didn't have free ports for the requested pod ports")
TAINT_TOLERATION = ("TaintToleration", "node(s) had taints that the pod didn't tolerate")

TAINT_COMPARISON_GATE = "TaintTolerationComparisonOperators"


@dataclass(frozen=True)
class PredicateFailure:
    name: str
    description: str
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)  # the evidence, for `explain`

    @property
    def message(self) -> str:
        return f"Predicate {self.name} failed: {self.description}"


Failure = PredicateFailure | InsufficientResource


def general_filter(pod: PodView, admitted: Sequence[PodView], node: Node,
                   comparison_operators: bool = False, used: Mapping[str, int] | None = None) -> list[Failure]:
    """Every failed check, in upstream's order (AdmissionCheck with includeAllFailures, then taints). `used`:
    the admitted pods' requests summed, when the caller has them."""
    allocatable = {**to_units(node.allocatable), PODS: int(node.allocatable.get(PODS, 0))}
    if used is None:
        used = sum_units(pod_request_units(p) for p in admitted)
    failures: list[Failure] = list(fits_request(admitting_pod_request_units(pod, node.allocatable), len(admitted),
                                                used, allocatable))
    spec = pod.raw.get("spec") or {}
    if not required_node_affinity_matches(spec, node):
        failures.append(PredicateFailure(*NODE_AFFINITY, node_affinity_mismatch(spec, node)))
    node_name = spec.get("nodeName") or ""
    if node_name and node_name != node.name:
        failures.append(PredicateFailure(*NODE_NAME, {"nodeName": str(node_name), "node": node.name}))
    in_use = [hp for p in admitted for hp in host_ports(p)]
    if ports_conflict(host_ports(pod), in_use):
        taken = [{"hostIP": ip, "protocol": proto, "hostPort": port} for ip, proto, port in host_ports(pod)
                 if ports_conflict([(ip, proto, port)], in_use)]
        failures.append(PredicateFailure(*NODE_PORTS, {"hostPorts": taken}))
    if not is_static(pod):
        tolerations = spec.get("tolerations") or []
        untolerated = find_untolerated_taint(node.taints, tolerations if isinstance(tolerations, list) else [],
                                             lambda t: t.effect == "NoExecute", comparison_operators)
        if untolerated is not None:
            taint = {"key": untolerated.key, "value": untolerated.value, "effect": untolerated.effect}
            failures.append(PredicateFailure(*TAINT_TOLERATION, {"taint": taint}))
    return failures


def _os_result(pod: PodView) -> PodAdmitResult | None:
    # The node's own kubernetes.io/os label is always the OS it runs, whatever the labels say.
    selector = pod.labels.get(LABEL_OS)
    if selector is not None and selector != NODE_OS:
        return PodAdmitResult(False, POD_OS_SELECTOR_MISMATCH,
                              "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
    os_field = (pod.raw.get("spec") or {}).get("os")
    if isinstance(os_field, dict) and os_field.get("name") != NODE_OS:
        return PodAdmitResult(False, POD_OS_NOT_SUPPORTED, "Failed to admit pod as the OS field doesn't match node OS")
    security = (pod.raw.get("spec") or {}).get("securityContext")
    # The Docker runtime does not report the SupplementalGroupsPolicy node feature (GA in 1.35).
    if isinstance(security, dict) and security.get("supplementalGroupsPolicy") == "Strict":
        return PodAdmitResult(False, SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
                              "SupplementalGroupsPolicy=Strict is not supported in this node")
    return None


def _failure_result(failure: Failure) -> PodAdmitResult:
    if isinstance(failure, InsufficientResource):
        return PodAdmitResult(False, failure.reason, failure.message, details={
            "predicate": "NodeResourcesFit", "resource": failure.resource, "requested": failure.requested,
            "used": failure.used, "allocatable": failure.capacity})
    return PodAdmitResult(False, failure.name, failure.message, details={"predicate": failure.name, **failure.details})


class PredicateAdmitHandler:
    def __init__(self, node: Callable[[], Node],
                 feature_gates: Mapping[str, bool] | None = None, metrics: Metrics | None = None) -> None:
        self._node = node
        self._metrics = metrics or Metrics()
        self._comparison_operators = bool((feature_gates or {}).get(TAINT_COMPARISON_GATE, False))
        # id of an admitted pod object -> (it, its view, its requests): each admission reads every admitted
        # pod, which changes far less often than pods are admitted; kept only for the pods of the last admission
        self._views: dict[int, tuple[Pod, PodView, dict[str, int]]] = {}

    def _views_of(self, pods: Sequence[Pod]) -> tuple[list[PodView], dict[str, int]]:
        """The admitted pods' views, and their requests summed."""
        known, views, out, requests = self._views, {}, [], []
        for p in pods:
            hit = known.get(id(p))  # the object is held with its view: its id names no other while cached
            if hit is None or hit[0] is not p:
                view = PodView.of(p)
                hit = (p, view, pod_request_units(view))
            views[id(p)] = hit
            out.append(hit[1])
            requests.append(hit[2])
        self._views = views
        return out, sum_units(requests)

    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
        view = PodView.of(pod)
        os_refusal = _os_result(view)
        if os_refusal is not None:
            return os_refusal
        others, used = self._views_of(admitted)
        failures = general_filter(view, others, self._node(), self._comparison_operators, used)
        only_affinity = bool(failures) and all(
            isinstance(f, PredicateFailure) and f.name == NODE_AFFINITY[0] for f in failures)
        if failures and is_critical(view):
            non_resource = [f for f in failures if not isinstance(f, InsufficientResource)]
            if non_resource:
                failures = list(non_resource)
            else:
                insufficient = [f for f in failures if isinstance(f, InsufficientResource)]
                try:
                    victims = pods_to_preempt(view, others, insufficient)
                except PreemptionError as e:
                    return PodAdmitResult(False, UNEXPECTED_ADMISSION_ERROR,
                                          "Unexpected error while attempting to recover from admission failure: "
                                          f"preemption: error finding a set of pods to preempt: {e}")
                # upstream labels each preemption with the first resource the critical pod lacked
                self._metrics.preemptions.labels(insufficient[0].resource if insufficient else "").inc(len(victims))
                return replace(ADMIT, victims=tuple(v.raw for v in victims))
        if failures:
            return replace(_failure_result(failures[0]), refetch_node=only_affinity)
        return ADMIT
