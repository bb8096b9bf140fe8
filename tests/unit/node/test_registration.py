from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

from minikubelet.base.clock import FakeClock
from minikubelet.kubeapi.rest import RestClient
from minikubelet.node.lister import NodeLister
from minikubelet.node.machine import MachineInfo
from minikubelet.node.registration import CMAD_ANNOTATION, NodeRegistration, initial_node
from minikubelet.node.status import NodeStatusInputs, set_node_status
from minikubelet.node.status_updater import NodeStatusUpdater
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, drive

Json = dict[str, Any]
GI = 1 << 30


def status_inputs(**kw: Any) -> NodeStatusInputs:
    base: dict[str, Any] = dict(hostname="n1", node_ip="10.0.0.5", machine=MachineInfo("m", "m", "b", "6.1", "Debian"),
                                capacity={"cpu": Fraction(2), "memory": Fraction(8 * GI),
                                          "ephemeral-storage": Fraction(100 * GI), "pods": Fraction(110),
                                          "hugepages-2Mi": Fraction(0)},
                                reservation={}, runtime_version="20.10.24", kubelet_version="v1.36.2")
    base.update(kw)
    return NodeStatusInputs(**base)


class World:
    def __init__(self, api: ApiServer, tmp_path: Path, labels: dict[str, str] | None = None,
                 taints: tuple[dict[str, str], ...] = ()) -> None:
        self.clock = FakeClock()
        self.client: RestClient = client_for(api, api.node_identity("n1"), tmp_path, self.clock)
        self.inputs = status_inputs()
        self.labels = labels or {}
        self.taints = taints

        async def current_inputs() -> NodeStatusInputs:
            return self.inputs

        async def build() -> Json:
            node = initial_node("n1", self.labels, self.taints)
            set_node_status(node, self.inputs, self.clock.now())
            return node

        self.registration = NodeRegistration(self.client, self.clock, "n1", build)
        self.updater = NodeStatusUpdater(self.client, self.clock, self.registration, current_inputs,
                                         update_frequency=10, report_frequency=300)


async def test_registration_posts_the_full_node(api_server: ApiServer, tmp_path: Path) -> None:
    w = World(api_server, tmp_path, {"node.kubernetes.io/pool": "a"}, ({"key": "k", "value": "", "effect": "NoSchedule"},))
    try:
        node = await drive(w.clock, w.registration.register())
        assert node["metadata"]["labels"] == {
            "beta.kubernetes.io/arch": node["metadata"]["labels"]["kubernetes.io/arch"],
            "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": node["metadata"]["labels"]["kubernetes.io/arch"],
            "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "node.kubernetes.io/pool": "a"}
        assert node["metadata"]["annotations"] == {CMAD_ANNOTATION: "true"}
        assert node["spec"]["taints"][0] == {"key": "k", "effect": "NoSchedule"}  # then the not-ready taint
        assert [c["type"] for c in node["status"]["conditions"]] == ["MemoryPressure", "DiskPressure", "PIDPressure",
                                                                     "Ready"]
        assert node["status"]["capacity"]["memory"] == "8Gi"
    finally:
        await w.client.close()


async def test_an_existing_node_is_adopted_on_409(api_server: ApiServer, tmp_path: Path) -> None:
    admin = api_server.admin()
    await admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "n1", "labels": {"kubernetes.io/hostname": "old", "team": "x"}},
        "status": {"capacity": {"cpu": "2", "hugepages-1Gi": "0"}}})
    w = World(api_server, tmp_path)
    try:
        node = await drive(w.clock, w.registration.register())
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == "n1" and labels["team"] == "x" and labels["kubernetes.io/os"] == "linux"
        assert node["metadata"]["annotations"][CMAD_ANNOTATION] == "true"
        assert "hugepages-1Gi" not in node["status"]["capacity"] and node["status"]["capacity"]["hugepages-2Mi"] == "0"
        calls = [(m, p.split("?")[0]) for u, m, p in api_server.handler.requests if u == "system:node:n1"]
        assert calls == [("POST", "/api/v1/nodes"), ("GET", "/api/v1/nodes/n1"), ("PATCH", "/api/v1/nodes/n1/status")]
    finally:
        await w.client.close()


async def test_status_patches_when_changed_or_every_report_period(api_server: ApiServer, tmp_path: Path) -> None:
    w = World(api_server, tmp_path)

    def node_calls() -> list[tuple[str, str]]:
        return [(m, p.split("?")[0]) for u, m, p in api_server.handler.requests if u == "system:node:n1"]

    try:
        await drive(w.clock, w.updater.sync())
        # as node-registration.json: POST, then an empty PATCH (nothing but the report is due)
        assert node_calls() == [("POST", "/api/v1/nodes"), ("GET", "/api/v1/nodes/n1"),
                                ("PATCH", "/api/v1/nodes/n1/status")]
        assert w.updater.patches == 1
        w.clock.advance(10)
        await w.updater.sync()
        assert w.updater.patches == 1  # heartbeat times only: not sent, the lease is the heartbeat
        w.inputs = status_inputs(runtime_errors=("container runtime is down",))
        w.clock.advance(10)
        await w.updater.sync()
        assert w.updater.patches == 2
        ready = w.updater.node["status"]["conditions"][3]  # type: ignore[index]
        assert (ready["status"], ready["message"]) == ("False", "container runtime is down")
        w.inputs = status_inputs(runtime_errors=("container runtime is down",))
        w.clock.advance(451)  # past 5 min + at most 50 % of it
        await w.updater.sync()
        assert w.updater.patches == 3
    finally:
        await w.client.close()


async def test_register_with_api_server_once_a_deleted_node_stays_gone(api_server: ApiServer, tmp_path: Path) -> None:
    """Upstream registerWithAPIServer runs until registrationCompleted, once per process; updateNodeStatus then
    fails with not found five times a round and nothing POSTs the Node again."""
    w = World(api_server, tmp_path)

    def node_calls() -> list[tuple[str, str]]:
        return [(m, p.split("?")[0]) for u, m, p in api_server.handler.requests if u == "system:node:n1"]

    try:
        await drive(w.clock, w.updater.sync())
        await api_server.admin().delete("nodes", "n1")
        before = len(node_calls())
        for _ in range(2):
            w.clock.advance(10)
            await drive(w.clock, w.updater.sync())
        assert w.updater.registered
        assert node_calls()[before:] == [("GET", "/api/v1/nodes/n1")] * 10
        assert [m for u, m, p in api_server.handler.requests if m == "POST" and p.startswith("/api/v1/nodes")] == [
            "POST"]
    finally:
        await w.client.close()


def test_initial_node_keeps_the_caller_labels_apart() -> None:
    labels = {"a": "b"}
    node = initial_node("n1", labels, ())
    node["metadata"]["labels"]["x"] = "y"
    assert labels == {"a": "b"} and "taints" not in node["spec"] and copy.deepcopy(node) == node


async def test_condition_transitions_are_recorded_as_node_events(api_server: ApiServer, tmp_path: Path) -> None:
    w = World(api_server, tmp_path)
    recorded: list[tuple[str, str]] = []
    w.updater.record = lambda kind, reason: recorded.append((kind, reason))
    try:
        await drive(w.clock, w.updater.sync())
        # the registered Node already has its conditions: nothing new but Ready's first state is not a transition
        assert recorded == []
        w.inputs = status_inputs(runtime_errors=("container runtime is down",), memory_pressure=True)
        w.clock.advance(10)
        await w.updater.sync()
        assert recorded == [("Normal", "NodeHasInsufficientMemory"), ("Normal", "NodeNotReady")]
        w.inputs = status_inputs()
        w.clock.advance(10)
        await w.updater.sync()
        assert recorded[2:] == [("Normal", "NodeHasSufficientMemory"), ("Normal", "NodeReady")]
    finally:
        await w.client.close()


async def test_wake_syncs_at_once_instead_of_at_the_end_of_the_period(api_server: ApiServer, tmp_path: Path) -> None:
    import asyncio

    from tests.unit.kubeapi.helpers import eventually

    w = World(api_server, tmp_path)
    task = asyncio.create_task(w.updater.run())
    try:
        for _ in range(100):  # the registration's own waits run on the fake clock
            if w.updater.patches == 1:
                break
            w.clock.advance(0.05)
            await asyncio.sleep(0.02)
        assert w.updater.patches == 1
        w.inputs = status_inputs(network_errors=("container runtime network not ready: …",))
        await asyncio.sleep(0.2)
        assert w.updater.patches == 1  # the fake clock holds the period: nothing more without a wake
        w.updater.wake()
        await eventually(lambda: w.updater.patches == 2, what="the woken report")
        ready = w.updater.node["status"]["conditions"][3]  # type: ignore[index]
        assert ready["message"] == "container runtime network not ready: …"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await w.client.close()


async def test_an_idle_node_reads_its_node_from_the_informer_and_gets_it_only_on_a_retry(
        api_server: ApiServer, tmp_path: Path) -> None:
    """upstream tryUpdateNodeStatus: try 0 reads nodeLister, a retry GETs the Node from the API server."""
    w = World(api_server, tmp_path)
    lister = NodeLister(w.client, "n1", w.clock)

    def node_calls() -> list[tuple[str, str]]:
        return [(m, p.split("?")[0]) for u, m, p in api_server.handler.requests if u == "system:node:n1"]

    try:
        await drive(w.clock, w.updater.sync())  # registered: POST, GET, PATCH (no informer yet)
        await lister.refresh()
        w.updater.cached = lister.object
        before = len(node_calls())
        for _ in range(3):
            w.clock.advance(10)
            await w.updater.sync()
        assert node_calls()[before:] == []  # idle: neither a GET nor a PATCH
        w.inputs = status_inputs(runtime_errors=("container runtime is down",))
        w.clock.advance(10)
        await w.updater.sync()
        assert node_calls()[before:] == [("PATCH", "/api/v1/nodes/n1/status")]  # a change: PATCHed at once
        await lister.refresh()
        w.inputs = status_inputs()
        api_server.faults.fail(409, "PATCH", "nodes/n1/status", times=1)
        w.clock.advance(10)
        await w.updater.sync()
        assert node_calls()[before + 2:] == [("PATCH", "/api/v1/nodes/n1/status"), ("GET", "/api/v1/nodes/n1"),
                                             ("PATCH", "/api/v1/nodes/n1/status")]
        ready = (await api_server.admin().get("nodes", "n1"))["status"]["conditions"][3]
        assert ready["status"] == "True"
    finally:
        await w.client.close()
