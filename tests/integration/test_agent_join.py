"""Issue 13 items 1-3 end to end: the real agent process with the real Docker Engine joins the test API
server through a TLS bootstrap, registers its Node (Ready, with the machine's true capacity) and renews
its lease."""

from __future__ import annotations

import os
import platform
import stat
import time
from pathlib import Path
from typing import Any

import aiodocker
import psutil
import pytest

from cgroups.detect import detect_cgroup_version
from minikubelet.base.quantity import parse_quantity
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, stop_and_clean

docker = agent_env.docker

pytestmark = pytest.mark.integration


class JoiningAgent(AgentProcess):
    """The agent process with `--bootstrap-kubeconfig` and `--kubeconfig`."""

    def __init__(self, base: Path, docker_host: str, bootstrap: Path) -> None:
        super().__init__(base, docker_host)
        self.bootstrap = bootstrap
        self.kubeconfig = base / "kubelet.conf"
        self.args = ["--bootstrap-kubeconfig", str(bootstrap), "--kubeconfig", str(self.kubeconfig),
                     "--node-labels", "node.kubernetes.io/pool=test"]



api = agent_env.api


async def test_agent_joins_through_tls_bootstrap(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    bootstrap = api.write_kubeconfig(tmp_path / "bootstrap.conf", api.add_bootstrap_token())
    agent = JoiningAgent(tmp_path / "agent", agent_env.docker_host(), bootstrap)
    agent.extra = {"nodeStatusUpdateFrequency": "2s", "nodeLeaseDurationSeconds": 8}
    admin = api.admin()
    agent.start()
    try:
        async def ready_node() -> dict[str, Any] | None:
            try:
                node = await admin.get("nodes", agent.node)
            except ApiStatusError:
                return None
            conditions = {c["type"]: c for c in node["status"].get("conditions", [])}
            return node if conditions.get("Ready", {}).get("status") == "True" else None

        node = await agent.wait_for("the Node Ready", ready_node, timeout=60)
        # the client certificate came from the bootstrap and is the one in use
        assert stat.S_IMODE(os.stat(agent.kubeconfig).st_mode) == 0o600
        assert (agent.root / "pki" / "kubelet-client-current.pem").is_symlink()
        users = {u for u, _, _ in api.handler.requests}
        assert {"system:bootstrap:abcdef", f"system:node:{agent.node}"} <= users
        # the machine's true capacity
        status = node["status"]
        capacity = status["capacity"]
        assert capacity["cpu"] == str(os.cpu_count()) and capacity["pods"] == "110"
        assert parse_quantity(capacity["memory"]) == psutil.virtual_memory().total
        st = os.statvfs(agent.root)
        assert parse_quantity(capacity["ephemeral-storage"]) == st.f_blocks * st.f_frsize
        assert parse_quantity(status["allocatable"]["memory"]) < parse_quantity(capacity["memory"])
        info = status["nodeInfo"]
        assert info["containerRuntimeVersion"].startswith(f"{agent_env.agent_runtime()}://") and info["kubeletVersion"] == "v1.36.2"
        assert info["bootID"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        assert info["kernelVersion"] == platform.release()
        assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
        assert any("registry.k8s.io/pause:3.10" in i["names"] for i in status["images"])
        assert [a["type"] for a in status["addresses"]] == ["InternalIP", "Hostname"]
        assert node["metadata"]["labels"]["node.kubernetes.io/pool"] == "test"
        # the lease, renewed every 2 s (a quarter of 8 s); created by its own task once the pods started, so
        # it may come a moment after the Node is Ready (the registration happens before the pods)
        async def lease_created() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = await admin.get("leases", agent.node, "kube-node-lease", "coordination.k8s.io/v1")
            except ApiStatusError:
                return None
            return found

        lease = await agent.wait_for("the lease", lease_created, timeout=20)
        assert lease["spec"]["holderIdentity"] == agent.node and lease["spec"]["leaseDurationSeconds"] == 8
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        first = lease["spec"]["renewTime"]

        async def renewed() -> bool:
            again = await admin.get("leases", agent.node, "kube-node-lease", "coordination.k8s.io/v1")
            return bool(again["spec"]["renewTime"] != first)

        started = time.monotonic()
        await agent.wait_for("a lease renewal", renewed, timeout=10)
        assert time.monotonic() - started < 5
        assert "accepted but not implemented" not in agent.log()
        # the node's own events, as `kubectl describe node` lists them; the birth cry before the registration
        events = (await admin.list("events", "default"))["items"]
        mine = [e for e in events if e["involvedObject"] == {"kind": "Node", "name": agent.node, "apiVersion": "v1"}]
        reasons = {e["reason"] for e in mine}
        assert {"Starting", "NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"} <= reasons
        assert ("CgroupV1" in reasons) == (detect_cgroup_version() == 1)
        assert all(e["source"] == {"component": "kubelet", "host": agent.node} for e in mine)
        paths = [(m, p.split("?")[0]) for u, m, p in api.handler.requests if u == f"system:node:{agent.node}"]
        assert paths.index(("POST", "/api/v1/namespaces/default/events")) < paths.index(("POST", "/api/v1/nodes"))
    finally:
        await stop_and_clean(agent, docker)
