"""Issue 13 item 8 and the rest of graceful deletion, end to end: the real agent joined to the test API
server, on the real Docker Engine.

- Admission of API pods uses the Node as the API has it: labels from registration (`--node-labels`) and
  from a later `kubectl label`, a NoExecute taint added later (`kubectl taint`; NoSchedule taints, as
  `registerWithTaints` gives here, are the scheduler's business, not the kubelet's), and the allocatable
  the Node reports (an extended resource patched into its status). A rejected pod is Failed in the API
  with upstream's reason and message, gets no container and is not retried.
- Pods deleted while the agent was down are finished when it starts (graceful: killed, then the final
  DELETE; forced: the containers are removed as orphans, at once).
- A force delete (grace 0) of a running pod kills it at once, not after the pod's grace.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from minikubelet.base.quantity import to_millicores
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError, Client
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, JoinedAgent, stop_and_clean
from tests.integration.runtime_view import PodObject, RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration

POOL = "example.com/pool"
DISK = "example.com/disk"
WIDGET = "example.com/widget"
# The pod watch and the node watch are two streams: a pod created right after a change of the Node may
# reach the agent before that change does. Only for node affinity does the agent (as upstream) read the
# Node again before refusing; for taints and resources the tests leave the watch that moment.
NODE_WATCH_SETTLE = 1.0




api = agent_env.api


def _pod(agent: AgentProcess, name: str, *, command: str = "exec sleep 100000", grace: int = 30,
         requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    # Names end in -<node>, so the teardown removes whatever a failed test left of them.
    container: dict[str, Any] = {"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", command]}
    if requests:
        container["resources"] = {"requests": requests, "limits": requests}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{agent.node}", "namespace": "default"},
            "spec": {"nodeName": agent.node, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": grace, "containers": [container], **spec}}


async def _get(admin: Client, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
    try:
        return await admin.get(plural, name, namespace)
    except ApiStatusError:
        return None


async def _containers_of(view: RuntimeView, uid: str) -> list[PodObject]:
    return await view.objects_of(uid)


async def _running_containers_of(view: RuntimeView, uid: str) -> list[PodObject]:
    return await view.objects_of(uid, running=True)


async def _wait_phase(agent: AgentProcess, admin: Client, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        pod = await _get(admin, "pods", name, "default")
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == phase else None

    result: dict[str, Any] = await agent.wait_for(f"{name} {phase} in the API", check, timeout=timeout)
    return result


def _status_patches(api: ApiServer, node: str, name: str) -> int:
    return sum(1 for u, m, p in api.handler.requests
               if u == f"system:node:{node}" and m == "PATCH" and p.startswith(f"/api/v1/namespaces/default/pods/{name}/status"))


async def test_api_pods_are_admitted_against_the_node_the_api_has(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker,
        runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api, "--node-labels", f"{POOL}=blue")
    agent.extra = {"registerWithTaints": [{"key": "example.com/registered", "value": "yes", "effect": "NoSchedule"}]}
    admin = api.admin()
    agent.start()
    try:
        node = await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
        assert node["metadata"]["labels"][POOL] == "blue"
        assert {"key": "example.com/registered", "value": "yes", "effect": "NoSchedule"} in node["spec"]["taints"]
        cpu_allocatable = to_millicores(node["status"]["allocatable"]["cpu"])
        # kubectl label node <node> example.com/disk=ssd; a device plugin's resource in the Node's status
        await admin.patch("nodes", agent.node, {"metadata": {"labels": {DISK: "ssd"}}})
        await admin.patch("nodes", agent.node, {"status": {"capacity": {WIDGET: "1"}, "allocatable": {WIDGET: "1"}}},
                          sub="status")
        await asyncio.sleep(NODE_WATCH_SETTLE)

        fits = await admin.create(_pod(agent, "fits", requests={"cpu": "100m"}, nodeSelector={POOL: "blue", DISK: "ssd"}))
        wrong_pool = await admin.create(_pod(agent, "wrong-pool", nodeSelector={POOL: "green"}))
        greedy_cpu = cpu_allocatable + 1000
        greedy = await admin.create(_pod(agent, "greedy", requests={"cpu": f"{greedy_cpu}m"}))
        widgets = await admin.create(_pod(agent, "widgets", requests={WIDGET: "2"}))

        await _wait_phase(agent, admin, fits["metadata"]["name"], "Running")
        rejected = {
            wrong_pool["metadata"]["name"]: (
                "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
                "BestEffort"),
            greedy["metadata"]["name"]: (
                "OutOfcpu", f"Node didn't have enough resource: cpu, requested: {greedy_cpu}, used: 100, "
                            f"capacity: {cpu_allocatable}", "Burstable"),
            # Without the Node's allocatable the agent would drop an extended resource it does not know
            # (upstream removeMissingExtendedResources) and run the pod.
            widgets["metadata"]["name"]: (
                f"OutOf{WIDGET}", f"Node didn't have enough resource: {WIDGET}, requested: 2, used: 0, capacity: 1",
                "BestEffort"),
        }
        for name, (reason, message, qos) in rejected.items():
            pod = await _wait_phase(agent, admin, name, "Failed")
            status = pod["status"]
            assert (status["reason"], status["message"], status["qosClass"]) == (
                reason, f"Pod was rejected: {message}", qos), name
            assert "containerStatuses" not in status
            assert await _containers_of(runtime_view, pod["metadata"]["uid"]) == []

        # kubectl taint node <node> example.com/drain=now:NoExecute (the taints so far stay)
        node = await admin.get("nodes", agent.node)
        taints = [*node["spec"]["taints"], {"key": "example.com/drain", "value": "now", "effect": "NoExecute"}]
        await admin.patch("nodes", agent.node, {"spec": {"taints": taints}})
        await asyncio.sleep(NODE_WATCH_SETTLE)
        intolerant = await admin.create(_pod(agent, "intolerant"))
        tolerant = await admin.create(_pod(agent, "tolerant", tolerations=[
            {"key": "example.com/drain", "operator": "Exists", "effect": "NoExecute"}]))
        pod = await _wait_phase(agent, admin, intolerant["metadata"]["name"], "Failed")
        assert (pod["status"]["reason"], pod["status"]["message"]) == (
            "TaintToleration", "Pod was rejected: Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")
        assert await _containers_of(runtime_view, pod["metadata"]["uid"]) == []
        await _wait_phase(agent, admin, tolerant["metadata"]["name"], "Running")
        rejected[intolerant["metadata"]["name"]] = ("TaintToleration", "", "BestEffort")

        # a label added and a pod needing it created at once: refused by the Node the watch brought, the pod
        # is checked again against the Node read anew (upstream getNodeSync), and runs
        await admin.patch("nodes", agent.node, {"metadata": {"labels": {"example.com/late": "yes"}}})
        late = await admin.create(_pod(agent, "late", nodeSelector={"example.com/late": "yes"}, tolerations=[
            {"key": "example.com/drain", "operator": "Exists", "effect": "NoExecute"}]))
        await _wait_phase(agent, admin, late["metadata"]["name"], "Running")

        # the kubelet evicts nobody for a NoExecute taint (the taint manager does): the first pod runs on
        pod = await admin.get("pods", fits["metadata"]["name"], "default")
        assert pod["status"]["phase"] == "Running" and not pod["metadata"].get("deletionTimestamp")

        # the rejections are Warning events, as a kubelet records them
        events = (await admin.list("events", "default"))["items"]
        for name, (reason, _message, _qos) in rejected.items():
            assert any(e["involvedObject"]["name"] == name and e["reason"] == reason and e["type"] == "Warning"
                       for e in events), name

        # not retried: the status is written once, and a later update of the pod changes nothing
        await admin.patch("pods", wrong_pool["metadata"]["name"], {"metadata": {"labels": {"touched": "yes"}}},
                          "default")
        await asyncio.sleep(3)
        for name in rejected:
            pod = await admin.get("pods", name, "default")
            assert pod["status"]["phase"] == "Failed", name
            assert _status_patches(api, agent.node, name) == 1, name
            assert await _containers_of(runtime_view, pod["metadata"]["uid"]) == []
    finally:
        await stop_and_clean(agent, docker)


async def test_pods_deleted_while_the_agent_was_down_are_finished_when_it_starts(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker,
        runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
        # `sh` as PID 1 ignores SIGTERM: only SIGKILL at the end of a grace stops these
        stubborn = "while true; do sleep 1; done"
        graceful = await admin.create(_pod(agent, "graceful", command=stubborn, grace=30))
        forced = await admin.create(_pod(agent, "forced", command=stubborn, grace=30))
        for pod in (graceful, forced):
            await _wait_phase(agent, admin, pod["metadata"]["name"], "Running")
        assert agent.stop() == 0  # the agent stops; its pods keep running
        assert await _running_containers_of(runtime_view, graceful["metadata"]["uid"])
        assert await _running_containers_of(runtime_view, forced["metadata"]["uid"])

        await admin.delete("pods", graceful["metadata"]["name"], "default", grace=3)
        await admin.delete("pods", forced["metadata"]["name"], "default", grace=0)
        pending = await admin.get("pods", graceful["metadata"]["name"], "default")
        assert pending["metadata"]["deletionGracePeriodSeconds"] == 3
        assert await _get(admin, "pods", forced["metadata"]["name"], "default") is None

        started = time.monotonic()
        agent.start()

        async def forced_stopped() -> bool:
            return not await _running_containers_of(runtime_view, forced["metadata"]["uid"])

        # an orphan is killed with grace 1 (the container kill's 2 s minimum), not its own 30 s
        await agent.wait_for("the force-deleted pod's containers stopped", forced_stopped, timeout=25)
        assert time.monotonic() - started < 25

        async def graceful_gone() -> bool:
            return await _get(admin, "pods", graceful["metadata"]["name"], "default") is None

        await agent.wait_for("the gracefully deleted pod deleted for good", graceful_gone, timeout=40)
        assert not await _running_containers_of(runtime_view, graceful["metadata"]["uid"])
        finals = [p for u, m, p in api.handler.requests
                  if u == f"system:node:{agent.node}" and m == "DELETE"
                  and p.startswith(f"/api/v1/namespaces/default/pods/{graceful['metadata']['name']}")]
        assert len(finals) == 1

        async def all_removed() -> bool:
            return (await _containers_of(runtime_view, graceful["metadata"]["uid"]) == []
                    and await _containers_of(runtime_view, forced["metadata"]["uid"]) == [])

        await agent.wait_for("both pods' containers removed", all_removed, timeout=30)
    finally:
        await stop_and_clean(agent, docker)


async def test_a_force_delete_kills_a_running_pod_at_once(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker,
        runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
        pod = await admin.create(_pod(agent, "forced", command="while true; do sleep 1; done", grace=30))
        await _wait_phase(agent, admin, pod["metadata"]["name"], "Running")
        uid = pod["metadata"]["uid"]
        started = time.monotonic()
        await admin.delete("pods", pod["metadata"]["name"], "default", grace=0)
        assert await _get(admin, "pods", pod["metadata"]["name"], "default") is None

        async def stopped() -> bool:
            return not await _running_containers_of(runtime_view, uid)

        await agent.wait_for("the container stopped", stopped, timeout=20, interval=0.1)
        took = time.monotonic() - started
        # grace 1, raised to the container kill's 2 s minimum: SIGKILL about 2 s after SIGTERM
        assert took < 6, f"force delete of a SIGTERM-ignoring pod took {took:.1f}s"

        async def removed() -> bool:
            return await _containers_of(runtime_view, uid) == []

        await agent.wait_for("the containers removed", removed, timeout=30)
    finally:
        await stop_and_clean(agent, docker)
