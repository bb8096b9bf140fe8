"""`explain` on the fake runtime: each reason class the test creates is the cause the document names, and every
document the tests produce validates against docs/explain.schema.json."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cri.fake import Program
from cri.types import ExecResult
from tests.unit.explain.explained import ExplainedNode, explained_node
from tests.unit.fake_node import IMAGE, FakeNode, make_pod
from tests.unit.pod.test_allocation import ResizeNode, api_pod, app, res, resized


@pytest.fixture
async def en(tmp_path: Path) -> AsyncIterator[ExplainedNode]:
    async for n in explained_node(tmp_path):
        yield n


async def test_crash_loop_names_the_backoff_the_restarts_and_the_exit_codes(en: ExplainedNode) -> None:
    node = en.node
    node.runtime.program("app", Program(exit_on_start=3))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    await node.advance(11)
    app = await en.container("app")
    assert app["action"] == "wait" and app["reason"] == "CrashLoopBackOff"
    assert app["restartCount"] >= 1 and app["exitCodes"][0] == 3
    assert 0 < app["backoffRemainingSeconds"] <= app["backoffSeconds"]
    assert "back-off" in app["message"]
    doc = await en.explain()
    assert doc["admission"]["admitted"] is True and doc["lifecycle"]["stage"] == "syncing"
    assert any(e["reason"] == "BackOff" for e in doc["events"])


async def test_an_image_that_never_pulls_names_the_last_pull_error(en: ExplainedNode) -> None:
    node = en.node
    node.runtime.fail_pull("registry.invalid/nope:1", "manifest unknown")
    node.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": "registry.invalid/nope:1"}])])
    await node.settle()
    await node.advance(2)
    app = await en.container("app")
    assert app["image"] == "registry.invalid/nope:1"
    assert app["reason"] == "ImagePullBackOff" and "manifest unknown" in app["lastPullError"]
    assert app["backoffRemainingSeconds"] > 0


async def test_a_stuck_init_container_is_what_the_app_waits_on(en: ExplainedNode) -> None:
    node = en.node
    node.runtime.program("setup", Program(exit_on_start=1))
    node.config.set_source_pods("file", [make_pod(inits=[{"name": "setup", "image": IMAGE}])])
    await node.settle()
    await node.advance(11)
    app = await en.container("app")
    assert app["action"] == "wait" and app["reason"] == "WaitingOnInit" and app["initContainer"] == "setup"
    assert "waiting on init container setup" in app["message"]
    setup = await en.container("setup")
    assert setup["kind"] == "init" and setup["reason"] == "CrashLoopBackOff" and setup["exitCodes"][0] == 1


async def test_a_missing_config_map_key_is_a_create_container_config_error(en: ExplainedNode) -> None:
    node = en.node
    env = [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}]
    node.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": IMAGE, "env": env}])])
    await node.settle()
    app = await en.container("app")
    assert app["action"] == "wait" and app["reason"] == "CreateContainerConfigError"
    assert "settings" in app["message"]


async def test_a_liveness_kill_keeps_the_probe_results_that_caused_it(en: ExplainedNode) -> None:
    node = en.node

    def exec_handler(cid: str, cmd: list[str]) -> ExecResult:
        return ExecResult(exit_code=1, stdout=b"db unreachable\n")

    node.runtime.set_exec(exec_handler)
    probe = {"exec": {"command": ["check"]}, "periodSeconds": 5, "failureThreshold": 2}
    node.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": IMAGE,
                                                               "livenessProbe": probe}])])
    await node.settle()
    await node.advance(12)
    doc = await en.explain()
    kills = doc["decision"].get("lastKills") or []
    assert kills, doc["decision"]
    kill = kills[0]
    assert kill["name"] == "app" and kill["reason"] == "LivenessProbe" and kill["action"] == "restart"
    assert kill["probe"]["result"] == "Failure" and "db unreachable" in kill["probe"]["output"]
    assert kill["probe"]["failureThreshold"] == 2
    probes = [p for p in doc["probes"] if p["kind"] == "liveness"]
    assert probes and probes[0]["lastRun"]["result"] == "Failure"


async def test_a_rejected_pod_names_the_predicate_and_its_numbers(en: ExplainedNode) -> None:
    node = en.node
    node.config.set_source_pods("file", [make_pod(), make_pod(name="q", uid="uid-2")])
    await node.settle()
    doc = await en.explain("q")
    assert doc["admission"]["admitted"] is False and doc["admission"]["reason"] == "OutOfpods"
    assert "requested: 1, used: 1, capacity: 1" in doc["admission"]["message"]
    assert doc["lifecycle"]["stage"] == "terminated" and doc["decision"] is None
    assert doc["status"]["phase"] == "Failed"
    node.config.set_source_pods("file", [])  # both leave: their records go with them (the admitted one's at cleanup)
    await node.advance(5)
    assert len(en.store) == 0 and await en.explainer.explain("default", "q") is None


async def test_a_terminating_pod_says_what_its_end_waits_for(en: ExplainedNode) -> None:
    node = en.node
    node.runtime.program("app", Program(ignore_stop_signal=True))
    pod = make_pod(terminationGracePeriodSeconds=30)
    node.config.set_source_pods("file", [pod])
    await node.settle()
    deleted = json.loads(json.dumps(pod))
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deleted["metadata"]["deletionGracePeriodSeconds"] = 30
    node.config.set_source_pods("file", [deleted])
    await node.settle()
    doc = await en.explain()
    assert doc["lifecycle"]["stage"] == "terminating"
    assert doc["lifecycle"]["kill"]["reason"] == "Deleted" and doc["lifecycle"]["kill"]["gracePeriodSeconds"] == 30
    assert any(w.startswith("containers to stop: app") for w in doc["deleteWaitsFor"])
    await node.advance(35, step=5)
    doc = await en.explain()
    assert doc["lifecycle"]["stage"] == "terminated"
    assert not any(w.startswith("containers to stop") for w in doc["deleteWaitsFor"])


async def test_an_idle_pod_records_nothing_new_on_its_resyncs(en: ExplainedNode) -> None:
    node = en.node
    node.config.set_source_pods("file", [make_pod()])
    await node.advance(30, step=10)
    rec = en.store.get("uid-1")
    assert rec is not None and rec.decision is not None
    decision, decided_at = rec.decision, rec.decided_at
    await node.advance(60, step=10)
    assert rec.decision is decision and rec.decided_at == decided_at and rec.syncs > 1
    app = await en.container("app")
    assert app["action"] == "keep" and app["reason"] == "Running"


async def test_a_deferred_resize_names_the_resource_that_did_not_fit(tmp_path: Path) -> None:
    node = FakeNode(tmp_path / "resize")
    try:
        stack, en = ResizeNode(tmp_path / "resize", node), ExplainedNode(node)
        p1, p2 = api_pod("p1", "1111", app("1", "1000M")), api_pod("p2", "2222", app("2", "1000M"))
        stack.run(p1, p2)
        await node.settle()
        stack.run(resized(p1, 2, c1=res("2500m", "1000M")), p2)
        await node.settle()
        doc = await en.explain("p1")
        pending = doc["resize"]["podResizePending"]
        assert pending["reason"] == "Deferred"
        assert pending["message"].endswith("cpu, requested: 2500, used: 2000, capacity: 4000")
        assert doc["resize"]["notAllocated"] == [{"name": "c1", "requests": {"cpu": "2500m", "memory": "1000M"},
                                                  "allocated": {"cpu": "1", "memory": "1000M"}}]
        assert (await en.explain("p2"))["resize"] == {}
    finally:
        await node.close()


async def test_an_unknown_pod_has_no_document(en: ExplainedNode) -> None:
    assert await en.explainer.explain("default", "nobody") is None
