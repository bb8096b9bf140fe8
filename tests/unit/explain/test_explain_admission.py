"""`explain`'s admission refusals as fields, not only the message: the predicate with its numbers (requested,
used, allocatable), the NoExecute taint the pod does not tolerate, the nodeSelector pair or the required
node-affinity terms the node's labels did not match, the host port already taken."""

from __future__ import annotations

from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from minikubelet.node.labels import Node, Taint
from minikubelet.pod.predicate import PredicateAdmitHandler
from tests.unit.explain.explained import ExplainedNode, explained_node
from tests.unit.fake_node import IMAGE, make_pod

NODE = Node("node-1", {"kubernetes.io/hostname": "node-1", "disk": "hdd"},
            (Taint("dedicated", "gpu", "NoExecute"),), {"cpu": Fraction(1), "memory": Fraction(1 << 30),
                                                      "pods": Fraction(10)})
TOLERATES = [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]


@pytest.fixture
async def en(tmp_path: Path) -> AsyncIterator[ExplainedNode]:
    async for n in explained_node(tmp_path, max_pods=10):
        n.node.manager.admit_handlers.append(PredicateAdmitHandler(lambda: NODE))
        yield n


async def refusal(en: ExplainedNode, **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "app", "image": IMAGE}])
    # the pod is not static (its source is the API): the taint check applies
    pod = make_pod(name="q", containers=containers, **spec)
    pod["metadata"]["annotations"]["kubernetes.io/config.source"] = "api"
    en.node.config.set_source_pods("api", [pod])
    await en.node.settle()
    doc = await en.explain("q")
    assert doc["admission"]["admitted"] is False and doc["status"]["phase"] == "Failed"
    out: dict[str, Any] = doc["admission"]["refusal"]
    return out


async def test_a_resource_refusal_names_requested_used_and_allocatable(en: ExplainedNode) -> None:
    big = [{"name": "app", "image": IMAGE, "resources": {"requests": {"cpu": "1500m"}}}]
    got = await refusal(en, containers=big, tolerations=TOLERATES)
    assert got == {"predicate": "NodeResourcesFit", "resource": "cpu", "requested": 1500, "used": 0,
                   "allocatable": 1000}


async def test_an_untolerated_taint_is_named(en: ExplainedNode) -> None:
    got = await refusal(en)
    assert got == {"predicate": "TaintToleration", "taint": {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}}


async def test_a_node_selector_pair_the_node_does_not_hold(en: ExplainedNode) -> None:
    got = await refusal(en, tolerations=TOLERATES, nodeSelector={"disk": "ssd", "kubernetes.io/hostname": "node-1",
                                                                  "zone": "a"})
    assert got == {"predicate": "NodeAffinity", "nodeSelector": [{"key": "disk", "value": "ssd", "nodeValue": "hdd"},
                                                                 {"key": "zone", "value": "a", "nodeValue": None}]}


async def test_required_affinity_terms_none_of_which_matched(en: ExplainedNode) -> None:
    term = {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd", "nvme"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    got = await refusal(en, tolerations=TOLERATES, affinity=affinity)
    assert got == {"predicate": "NodeAffinity", "nodeSelectorTerms": [term], "nodeLabels": dict(NODE.labels)}


async def test_a_host_port_already_taken(en: ExplainedNode) -> None:
    ports = [{"name": "app", "image": IMAGE, "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    first = make_pod(name="p", containers=ports, tolerations=TOLERATES)
    first["metadata"]["annotations"]["kubernetes.io/config.source"] = "api"
    en.node.config.set_source_pods("file", [first])
    await en.node.settle()
    got = await refusal(en, containers=ports, tolerations=TOLERATES, uid="uid-2")
    assert got == {"predicate": "NodePorts", "hostPorts": [{"hostIP": "0.0.0.0", "protocol": "TCP", "hostPort": 8080}]}
