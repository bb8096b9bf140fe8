"""`explain` on a joined node, end to end on the real Docker Engine: pods created through the test API server, the
document read through its node proxy (`/api/v1/nodes/NODE/proxy/debug/pods/NS/NAME/explain`, as `kubectl get
--raw` asks it) by a user granted `get nodes/proxy` and no more; the API server then asks the kubelet API with its
kubelet client certificate, which the agent authorises by SubjectAccessReview. The document validates against
docs/explain.schema.json and names the cause the test created: a crash loop with its exit code, a pull that
fails with its error."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any

import aiodocker
import jsonschema
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import Client
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration.agent_env import JoinedAgent, free_port, registered_node, stop_and_clean

pytestmark = pytest.mark.integration
api = agent_env.api
docker = agent_env.docker

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "explain.schema.json").read_text())
NEVER_PULLS = "127.0.0.1:1/mkl/never:1"  # nothing listens on port 1: the pull fails at once
READER = "explain-reader"


class ProxiedAgent(JoinedAgent):
    """A joined node with InternalIP 127.0.0.1 and its kubelet API (Webhook authn/authz) on a free port."""

    def __init__(self, base: Path, docker_host: str, api: ApiServer) -> None:
        super().__init__(base, docker_host, api, "--node-ip", "127.0.0.1")
        self.extra = {
            "port": free_port(),
            "authentication": {"x509": {"clientCAFile": str(api.ca_file)},
                               "webhook": {"enabled": True}, "anonymous": {"enabled": False}},
            "authorization": {"mode": "Webhook"},
        }


def _pod(name: str, node: str, container: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", **container}]}}


async def _explained(reader: Client, node: str, pod: str) -> dict[str, Any] | None:
    reply = await reader.request("GET", f"/api/v1/nodes/{node}/proxy/debug/pods/default/{pod}/explain")
    if reply.status in (404, 503):  # not admitted yet; the kubelet API not listening yet
        return None
    assert reply.status == 200, reply.body
    doc: dict[str, Any] = reply.body if isinstance(reply.body, dict) else json.loads(reply.body)
    jsonschema.validate(doc, SCHEMA)
    return doc


def _main(doc: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (doc["decision"] or {}).get("containers", []) if c["name"] == "main"), None)


async def test_explain_through_the_api_servers_node_proxy_names_the_cause(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    agent = ProxiedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    api.authorizer.grant(READER, "nodes/proxy", ("get",))
    reader = api.client(api.identity(READER))
    uids: list[str] = []
    agent.start()
    try:
        await agent.wait_for("the Node", functools.partial(registered_node, admin, agent.node), timeout=30)
        for name, container in (("crash", {"image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                           "command": ["sh", "-c", "exit 3"]}),
                                ("nopull", {"image": NEVER_PULLS, "imagePullPolicy": "Always"})):
            uids.append((await admin.create(_pod(name, agent.node, container)))["metadata"]["uid"])

        async def crash_looping() -> dict[str, Any] | None:
            doc = await _explained(reader, agent.node, "crash")
            main = _main(doc) if doc else None
            return doc if main and main["reason"] == "CrashLoopBackOff" else None

        async def pull_failing() -> dict[str, Any] | None:
            doc = await _explained(reader, agent.node, "nopull")
            main = _main(doc) if doc else None
            ok = main and main["reason"] in ("ErrImagePull", "ImagePullBackOff") and "lastPullError" in main
            return doc if ok else None

        crash, nopull = await asyncio.gather(
            agent.wait_for("crash explained as CrashLoopBackOff", crash_looping, timeout=30),
            agent.wait_for("nopull explained as a failed pull", pull_failing, timeout=30))
        main = _main(crash)
        assert main is not None and main["action"] == "wait" and main["exitCodes"][0] == 3
        assert main["restartCount"] >= 1 and 0 <= main["backoffRemainingSeconds"] <= main["backoffSeconds"]
        assert crash["lifecycle"]["stage"] == "syncing" and crash["admission"]["admitted"] is True
        assert crash["pod"] == {"namespace": "default", "name": "crash", "uid": crash["pod"]["uid"]}
        main = _main(nopull)
        assert main is not None and main["image"] == NEVER_PULLS and main["lastPullError"]
        # the pod's events kept on the node say the same
        assert any(e["reason"] == "BackOff" for e in crash["events"]), crash["events"]

        # the API server stops a user without nodes/proxy; the agent stops one that bypasses it without the grant
        denied = await api.client(api.identity("someone-else")).request(
            "GET", f"/api/v1/nodes/{agent.node}/proxy/debug/pods/default/crash/explain")
        assert denied.status == 403
        unknown = await reader.request("GET", f"/api/v1/nodes/{agent.node}/proxy/debug/pods/default/nobody/explain")
        assert unknown.status == 404 and "not known on this node" in str(unknown.body)
        assert ("GET", "/debug/pods/default/crash/explain") in api.kubelet_proxy.requests
    finally:
        agent.stop()
        # a pod that never pulled has a sandbox but no directory under the agent's root, which is what
        # stop_and_clean finds API pods by: remove it by uid (else its cgroup holds the clean-up for 30 s)
        for c in await docker.containers.list(all=True, filters=json.dumps({"label": ["io.kubernetes.pod.uid"]})):
            if c._container.get("Labels", {}).get("io.kubernetes.pod.uid") in uids:
                await c.delete(force=True)
        await stop_and_clean(agent, docker)
