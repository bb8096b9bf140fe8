"""The predicate admit handler, table-tested with upstream v1.36's reasons and messages."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from minikubelet.base.podview import Pod
from minikubelet.node.labels import Node, Taint, initial_node
from minikubelet.pod.admission import ADMIT, PodAdmitResult
from minikubelet.pod.predicate import PredicateAdmitHandler

ALLOCATABLE = {"cpu": Fraction(2), "memory": Fraction(4 * 2**30), "ephemeral-storage": Fraction(10 * 2**30),
               "pods": Fraction(110)}
NODE = initial_node("node-1", {"disktype": "ssd", "gen": "5"}, ({"key": "dedicated", "value": "x", "effect": "NoExecute"},),
                    ALLOCATABLE, arch="amd64")


def pod(name: str = "p", *, cpu: str | None = None, memory: str | None = None, source: str = "api",
        containers: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None, **spec: Any) -> Pod:
    resources: dict[str, Any] = {}
    if cpu or memory:
        resources["requests"] = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    cs = containers or [{"name": "c", "image": "i", "resources": resources}]
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name,
                            "annotations": {"kubernetes.io/config.source": source}, "labels": labels or {}}
    tolerations = spec.pop("tolerations", [{"key": "dedicated", "operator": "Exists"}])
    return {"metadata": meta, "spec": {"containers": cs, "tolerations": tolerations, **spec}}


def handler(node: Node = NODE, gates: dict[str, bool] | None = None) -> PredicateAdmitHandler:
    return PredicateAdmitHandler(lambda: node, gates)


def refuse(reason: str, message: str) -> PodAdmitResult:
    return PodAdmitResult(False, reason, message)


# --- resources ------------------------------------------------------------------------------------

def test_out_of_cpu_with_upstreams_message() -> None:
    admitted = [pod("a", cpu="1"), pod("b", cpu="600m")]
    assert handler().admit(pod(cpu="500m"), admitted) == refuse(
        "OutOfcpu", "Node didn't have enough resource: cpu, requested: 500, used: 1600, capacity: 2000")


def test_exactly_the_remaining_capacity_is_admitted() -> None:
    admitted = [pod("a", cpu="1500m", memory="3Gi")]
    assert handler().admit(pod(cpu="500m", memory="1Gi"), admitted) == ADMIT
    assert handler().admit(pod(cpu="501m"), admitted).reason == "OutOfcpu"


@pytest.mark.parametrize(("requests", "reason", "message"), [
    ({"memory": "5Gi"}, "OutOfmemory",
     "Node didn't have enough resource: memory, requested: 5368709120, used: 0, capacity: 4294967296"),
    ({"ephemeral-storage": "11Gi"}, "OutOfephemeral-storage",
     "Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240"),
    ({"hugepages-2Mi": "2Mi"}, "OutOfhugepages-2Mi",
     "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, capacity: 0"),
    # cpu is rounded up to the millicore, as Quantity.MilliValue().
    ({"cpu": "2000.1m"}, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 2001, used: 0, capacity: 2000"),
])
def test_each_resource_refuses_with_its_reason(requests: dict[str, str], reason: str, message: str) -> None:
    p = pod(containers=[{"name": "c", "image": "i", "resources": {"requests": requests}}])
    assert handler().admit(p, []) == refuse(reason, message)


def test_extended_resources_the_node_does_not_have_are_ignored() -> None:
    # removeMissingExtendedResources: cluster-level resources never block a pod on the node.
    p = pod(containers=[{"name": "c", "image": "i", "resources": {"requests": {"example.com/gpu": "1"},
                                                                   "limits": {"example.com/gpu": "1"}}}])
    assert handler().admit(p, []) == ADMIT


def test_extended_resources_the_node_has_are_counted() -> None:
    node = initial_node("node-1", {}, (), {**ALLOCATABLE, "example.com/gpu": Fraction(1)})
    p = pod(containers=[{"name": "c", "image": "i", "resources": {"requests": {"example.com/gpu": "2"}}}])
    assert handler(node).admit(p, []) == refuse(
        "OutOfexample.com/gpu", "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1")


def test_out_of_pods_comes_first() -> None:
    node = initial_node("node-1", {}, (), {**ALLOCATABLE, "pods": Fraction(1)})
    assert handler(node).admit(pod(cpu="3"), [pod("a")]) == refuse(
        "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1")


def test_effective_requests_count_init_containers_sidecars_and_overhead() -> None:
    # max(init 1500m, sidecar 300m + app 200m) + overhead 100m = 1600m
    p = pod(containers=[{"name": "app", "image": "i", "resources": {"requests": {"cpu": "200m"}}}],
            initContainers=[{"name": "init", "image": "i", "resources": {"requests": {"cpu": "1500m"}}},
                            {"name": "side", "image": "i", "restartPolicy": "Always",
                             "resources": {"requests": {"cpu": "300m"}}}],
            overhead={"cpu": "100m"})
    assert handler().admit(pod("x", cpu="401m"), [p]) == refuse(
        "OutOfcpu", "Node didn't have enough resource: cpu, requested: 401, used: 1600, capacity: 2000")


def test_pod_level_requests_replace_the_containers_sum() -> None:
    p = pod(cpu="100m", resources={"requests": {"cpu": "1900m"}})
    assert handler().admit(pod("x", cpu="101m"), [p]).message.endswith("requested: 101, used: 1900, capacity: 2000")


def test_a_pod_without_requests_fits_a_full_node() -> None:
    assert handler().admit(pod(), [pod("a", cpu="2")]) == ADMIT


# --- node affinity, node name ---------------------------------------------------------------------

AFFINITY_FAILED = refuse("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


@pytest.mark.parametrize(("spec", "admitted"), [
    ({"nodeSelector": {"disktype": "ssd"}}, True),
    ({"nodeSelector": {"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux"}}, True),
    ({"nodeSelector": {"kubernetes.io/arch": "amd64", "beta.kubernetes.io/arch": "amd64"}}, True),
    ({"nodeSelector": {"disktype": "hdd"}}, False),
    ({"nodeSelector": {"zone": ""}}, False),
    ({"affinity": required(expr("disktype", "In", "hdd", "ssd"))}, True),
    ({"affinity": required(expr("disktype", "In", "hdd"))}, False),
    ({"affinity": required(expr("disktype", "NotIn", "hdd"))}, True),
    ({"affinity": required(expr("zone", "NotIn", "a"))}, True),
    ({"affinity": required(expr("disktype", "Exists"))}, True),
    ({"affinity": required(expr("zone", "Exists"))}, False),
    ({"affinity": required(expr("zone", "DoesNotExist"))}, True),
    ({"affinity": required(expr("gen", "Gt", "4"))}, True),
    ({"affinity": required(expr("gen", "Gt", "5"))}, False),
    ({"affinity": required(expr("gen", "Lt", "6"))}, True),
    ({"affinity": required(expr("disktype", "Lt", "6"))}, False),  # the label is no integer
    ({"affinity": required(expr("gen", "Gt", "x"))}, False),  # invalid requirement: the term never matches
    ({"affinity": required(expr("disktype", "In"))}, False),  # In without values is invalid
    ({"affinity": required(expr("zone", "In", "a"), expr("disktype", "In", "ssd"))}, True),  # terms OR-ed
    ({"affinity": required({"matchExpressions": [{"key": "disktype", "operator": "In", "values": ["ssd"]},
                                                 {"key": "gen", "operator": "In", "values": ["4"]}]})}, False),
    ({"affinity": required({})}, False),  # only empty terms: nothing matches
    ({"affinity": required()}, False),
    ({"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]})}, True),
    ({"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]})}, False),
    ({"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-2"]}]})},
     True),
    ({"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]})}, False),
    ({"nodeSelector": {"disktype": "ssd"}, "affinity": required(expr("zone", "Exists"))}, False),  # both must match
    ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": expr("zone", "Exists")}]}}}, True),
])
def test_node_affinity(spec: dict[str, Any], admitted: bool) -> None:
    assert handler().admit(pod(**spec), []) == (ADMIT if admitted else AFFINITY_FAILED)


def test_node_labels_override_the_well_known_ones() -> None:
    node = initial_node("node-1", {"kubernetes.io/hostname": "other"}, (), ALLOCATABLE)
    assert node.labels["kubernetes.io/hostname"] == "other"
    assert handler(node).admit(pod(nodeSelector={"kubernetes.io/hostname": "node-1"}), []) == AFFINITY_FAILED


def test_node_name_must_be_this_node() -> None:
    assert handler().admit(pod(nodeName="node-1"), []) == ADMIT
    assert handler().admit(pod(nodeName="node-2"), []) == refuse(
        "NodeName", "Predicate NodeName failed: node(s) didn't match the requested node name")


# --- host ports -----------------------------------------------------------------------------------

PORTS_FAILED = refuse("NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports")


def with_port(name: str, host_port: int, host_ip: str = "", protocol: str = "TCP", sidecar: bool = False) -> Pod:
    port: dict[str, Any] = {"containerPort": 80, "hostPort": host_port, "protocol": protocol}
    if host_ip:
        port["hostIP"] = host_ip
    c = {"name": "c", "image": "i", "ports": [port]}
    if sidecar:
        return pod(name, initContainers=[{**c, "name": "s", "restartPolicy": "Always"}])
    return pod(name, containers=[c])


@pytest.mark.parametrize(("existing", "new", "clash"), [
    (with_port("a", 8080), with_port("b", 8080), True),
    (with_port("a", 8080), with_port("b", 8081), False),
    (with_port("a", 8080), with_port("b", 8080, protocol="UDP"), False),
    (with_port("a", 8080, "127.0.0.1"), with_port("b", 8080), True),  # 0.0.0.0 clashes with any IP
    (with_port("a", 8080), with_port("b", 8080, "127.0.0.1"), True),  # any IP clashes with 0.0.0.0
    (with_port("a", 8080, "127.0.0.1"), with_port("b", 8080, "127.0.0.2"), False),
    (with_port("a", 8080, sidecar=True), with_port("b", 8080), True),  # sidecars hold their ports
])
def test_host_ports(existing: Pod, new: Pod, clash: bool) -> None:
    assert handler().admit(new, [existing]) == (PORTS_FAILED if clash else ADMIT)


def test_init_container_ports_are_not_held() -> None:
    p = pod("a", initContainers=[{"name": "i", "image": "i", "ports": [{"containerPort": 1, "hostPort": 8080}]}])
    assert handler().admit(with_port("b", 8080), [p]) == ADMIT


# --- taints ---------------------------------------------------------------------------------------

TAINT_FAILED = refuse("TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")


@pytest.mark.parametrize(("tolerations", "admitted"), [
    ([], False),
    ([{"key": "dedicated", "operator": "Exists"}], True),
    ([{"key": "dedicated", "value": "x"}], True),  # the operator defaults to Equal
    ([{"key": "dedicated", "operator": "Equal", "value": "y"}], False),
    ([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], False),
    ([{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}], True),
    ([{"operator": "Exists"}], True),  # an empty key with Exists tolerates everything
])
def test_no_execute_taints(tolerations: list[dict[str, Any]], admitted: bool) -> None:
    assert handler().admit(pod(tolerations=tolerations), []) == (ADMIT if admitted else TAINT_FAILED)


def test_no_schedule_taints_are_the_schedulers() -> None:
    node = Node("node-1", NODE.labels, (Taint("k", "", "NoSchedule"), Taint("p", "", "PreferNoSchedule")), ALLOCATABLE)
    assert handler(node).admit(pod(tolerations=[]), []) == ADMIT


def test_static_pods_skip_the_taint_check() -> None:
    assert handler().admit(pod(source="file", tolerations=[]), []) == ADMIT


@pytest.mark.parametrize(("gate", "admitted"), [(False, False), (True, True)])
def test_comparison_operators_need_their_feature_gate(gate: bool, admitted: bool) -> None:
    node = Node("node-1", NODE.labels, (Taint("level", "3", "NoExecute"),), ALLOCATABLE)
    p = pod(tolerations=[{"key": "level", "operator": "Gt", "value": "2"}])
    h = handler(node, gates={"TaintTolerationComparisonOperators": gate})
    assert h.admit(p, []) == (ADMIT if admitted else TAINT_FAILED)


# --- OS and other refusals before the predicates --------------------------------------------------

def test_os_label_and_field() -> None:
    assert handler().admit(pod(labels={"kubernetes.io/os": "windows"}), []) == refuse(
        "PodOSSelectorNodeLabelDoesNotMatch",
        "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
    assert handler().admit(pod(labels={"kubernetes.io/os": "linux"}, os={"name": "linux"}), []) == ADMIT
    assert handler().admit(pod(os={"name": "windows"}), []) == refuse(
        "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")


def test_strict_supplemental_groups_policy_is_not_supported() -> None:
    assert handler().admit(pod(securityContext={"supplementalGroupsPolicy": "Strict"}), []) == refuse(
        "SupplementalGroupsPolicyNotSupported", "SupplementalGroupsPolicy=Strict is not supported in this node")
    assert handler().admit(pod(securityContext={"supplementalGroupsPolicy": "Merge"}), []) == ADMIT


def test_the_first_failure_is_reported() -> None:
    p = pod(cpu="3", nodeSelector={"disktype": "hdd"}, tolerations=[])
    assert handler().admit(p, []).reason == "OutOfcpu"
    assert handler().admit(pod(nodeSelector={"disktype": "hdd"}, tolerations=[]), []).reason == "NodeAffinity"


# --- critical pods --------------------------------------------------------------------------------

def test_a_static_pod_without_pods_to_preempt_is_refused_as_upstream() -> None:
    r = handler().admit(pod("s", cpu="2500m", source="file"), [pod("a", cpu="1", source="file")])
    assert r == refuse("UnexpectedAdmissionError",
                       "Unexpected error while attempting to recover from admission failure: preemption: error finding "
                       "a set of pods to preempt: no set of running pods found to reclaim resources: "
                       "[(res: cpu, q: 1500), ]")
    assert r.victims == ()


def test_a_critical_pod_reports_its_non_resource_failures_only() -> None:
    p = pod("s", cpu="3", source="file", nodeSelector={"disktype": "hdd"})
    assert handler().admit(p, []) == AFFINITY_FAILED


def test_a_critical_pod_preempts_the_closest_lower_pods() -> None:
    best_effort = pod("be")
    small = pod("small", cpu="300m")
    big = pod("big", cpu="1")
    other_static = pod("static", cpu="500m", source="file")
    r = handler().admit(pod("s", cpu="1", source="file"), [best_effort, small, big, other_static])
    assert r == ADMIT
    # 800m is missing; the burstable pod of 1 CPU covers it alone (best-effort pods free no CPU).
    assert [p["metadata"]["name"] for p in r.victims] == ["big"]


def test_priority_lets_a_critical_pod_preempt_a_lower_static_pod() -> None:
    low = pod("low", cpu="1500m", source="file", priority=10)
    r = handler().admit(pod("s", cpu="1", source="file", priority=20), [low])
    assert r == ADMIT and r.victims == (low,)


def test_the_node_is_read_again_only_when_node_affinity_is_the_only_failure() -> None:
    """Upstream's generalFilter fetches the Node synchronously and checks again only then."""
    only_affinity = handler().admit(pod(nodeSelector={"disktype": "hdd"}), [])
    assert only_affinity == AFFINITY_FAILED and only_affinity.refetch_node
    with_cpu = handler().admit(pod(cpu="3", nodeSelector={"disktype": "hdd"}), [])
    assert with_cpu.reason == "OutOfcpu" and not with_cpu.refetch_node
    with_taint = handler().admit(pod(nodeSelector={"disktype": "hdd"}, tolerations=[]), [])
    assert with_taint.reason == "NodeAffinity" and not with_taint.refetch_node
    assert not handler().admit(pod(cpu="3"), []).refetch_node
