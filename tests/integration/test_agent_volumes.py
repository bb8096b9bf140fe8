"""Issue 12 (item 3) end to end: memory-backed emptyDirs, downwardAPI and projected volumes, subPathExpr and a
refused projected source, read back from inside real containers on the Docker Engine."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from minikubelet.volumes.mounter import HostMounter
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod, stop_and_clean
from tests.integration.cgroup_reader import CgroupReader
from tests.integration.runtime_view import RuntimeView

pytestmark = pytest.mark.integration
docker = agent_env.docker
runtime_view = views.runtime_view
MI = 1 << 20


@pytest.fixture
async def agent(tmp_path: Path, docker: aiodocker.Docker) -> AsyncIterator[AgentProcess]:
    """The agent, and after it every tmpfs it left below its root dir unmounted (pods outlive a stopped agent)."""
    a = AgentProcess(tmp_path, agent_env.docker_host())
    try:
        yield a
    finally:
        await stop_and_clean(a, docker)
        mounter = HostMounter()
        root = str(a.root.resolve())
        for m in sorted(mounter.mount_points(), key=lambda m: m.path, reverse=True):
            if m.fstype == "tmpfs" and m.path.startswith(root + "/"):
                mounter.unmount(m.path)


def tmpfs_under(root: Path) -> dict[str, str]:
    """Mount point -> options of every tmpfs below root, from the host's mount table."""
    out = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if rest and rest[0] == "tmpfs" and fields[4].startswith(str(root.resolve()) + "/"):
            out[fields[4]] = rest[2]
    return out


async def output(a: AgentProcess, view: RuntimeView, pod: str, name: str) -> str:
    async def done() -> str | None:
        p = await a.pod(pod)
        if p is None or not cstatus(p, name).get("containerID"):
            return None
        text = (await view.logs(container_id(p, name))).decode()
        return text if "END" in text else None

    return str(await a.wait_for(f"{pod}/{name} output", done, timeout=60))


def volumes_pod() -> dict[str, Any]:
    item = {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}
    pod = simple_pod("vols", [{
        "name": "app",
        "resources": {"limits": {"memory": "64Mi", "cpu": "250m"}},
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [
            {"name": "mem", "mountPath": "/mem"}, {"name": "mem-pod", "mountPath": "/mem-pod"},
            {"name": "info", "mountPath": "/info"}, {"name": "proj", "mountPath": "/proj"},
            {"name": "logs", "mountPath": "/logs", "subPathExpr": "pods/$(POD_NAME)"},
            {"name": "logs", "mountPath": "/all-logs"},
        ],
        "command": ["sh", "-c", "; ".join([
            "grep -E ' /mem(-pod)? ' /proc/mounts", "df -k /mem /mem-pod | tail -n 2",
            "head -c 1048576 /dev/zero > /mem/blob && echo WROTE",
            "echo ---labels; cat /info/labels; echo; echo ---note; cat /info/note; echo",
            "echo ---cpu; cat /info/cpu; echo; echo ---modes; stat -L -c '%n %a' /info/name /info/cpu /proj/name",
            "touch /info/x 2>/dev/null || echo READONLY",
            "echo from-app > /logs/hello; ls /all-logs/pods", "echo END", "exec sleep 3600"])],
    }])
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    pod["metadata"]["labels"] = {"app": "vols", "tier": "a"}
    pod["metadata"]["annotations"] = {"note": "hi there"}
    pod["spec"]["volumes"] = [
        {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        {"name": "mem-pod", "emptyDir": {"medium": "Memory"}},
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "note", "fieldRef": {"fieldPath": "metadata.annotations['note']"}},
            {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}},
            {**item, "mode": 0o400}]}},
        {"name": "proj", "projected": {"defaultMode": 0o440, "sources": [{"downwardAPI": {"items": [item]}}]}},
        {"name": "logs", "emptyDir": {}},
    ]
    return pod


async def test_volumes_read_back_from_inside(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    agent.put("vols.yaml", volumes_pod())
    agent.put("refused.yaml", simple_pod("refused", [
        {"name": "app", "command": ["sleep", "3600"], "volumeMounts": [{"name": "token", "mountPath": "/t"}]}],
        volumes=[{"name": "token", "projected": {"sources": [{"clusterTrustBundle": {"path": "token", "signerName": "x"}}]}}]))
    agent.start()
    out = await output(agent, runtime_view, "vols", "app")
    p = await agent.pod("vols")
    assert p is not None
    uid = p["metadata"]["uid"]
    full_name = p["metadata"]["name"]

    mounts = dict(re.findall(r"^tmpfs (/mem|/mem-pod) tmpfs (\S+)", out, re.M))
    assert "size=16384k" in mounts["/mem"].split(",")      # sizeLimit
    assert "noswap" in mounts["/mem"].split(",")           # kernel 6.4+: memory volumes never reach swap
    assert "size=65536k" in mounts["/mem-pod"].split(",")  # no sizeLimit: the pod's memory limit
    assert re.search(r"^tmpfs\s+16384\s+\d+\s+\d+\s+\S+\s+/mem$", out, re.M), out
    assert "WROTE" in out
    assert '---labels\napp="vols"\ntier="a"\n---note\nhi there\n---cpu\n250\n' in out
    assert "/info/name 400\n/info/cpu 644\n/proj/name 440\n" in out
    assert "READONLY" in out
    assert re.search(rf"^{re.escape(full_name)}$", out, re.M)  # subPathExpr made pods/<pod name>

    volumes = agent.root / "pods" / uid / "volumes"
    on_host = tmpfs_under(agent.root)
    for plugin, name in (("empty-dir", "mem"), ("empty-dir", "mem-pod"), ("downward-api", "info"),
                         ("projected", "proj")):
        assert str((volumes / f"kubernetes.io~{plugin}" / name).resolve()) in on_host
    assert (volumes / "kubernetes.io~empty-dir" / "logs" / "pods" / full_name / "hello").read_text() == "from-app\n"
    assert (volumes / "kubernetes.io~empty-dir" / "mem" / "blob").stat().st_size == MI
    # the tmpfs pages the container wrote are charged to its cgroup, so to the pod's (a Guaranteed pod)
    reader = CgroupReader(agent.cgroup_root)
    memory_stat = dict(line.split() for line in (reader.pod("", uid) / "memory.stat").read_text().splitlines())
    assert int(memory_stat["total_shmem" if reader.version == 1 else "shmem"]) >= MI

    refused = await agent.wait_pod(
        "refused", lambda q: "waiting" in cstatus(q, "app").get("state", {})
        and cstatus(q, "app")["state"]["waiting"]["reason"] == "CreateContainerConfigError", "refused")
    message = cstatus(refused, "app")["state"]["waiting"]["message"]
    assert message == ('MountVolume.SetUp failed for volume "token" : sources[0]: projected clusterTrustBundle '
                       "sources are not supported yet; only downwardAPI, configMap, secret and serviceAccountToken "
                       "sources can be served")
    events = (await agent.get_json("/debug/events"))["items"]
    assert any(e["reason"] == "FailedMount" and e["message"] == message
               and e["involvedObject"].get("uid") == refused["metadata"]["uid"] for e in events)

    (agent.manifests / "vols.yaml").unlink()
    await agent.wait_gone("vols")

    async def torn_down() -> bool:
        return not (agent.root / "pods" / uid).exists()

    await agent.wait_for("pod dir removed", torn_down, timeout=30)
    assert not any(uid in path for path in tmpfs_under(agent.root))
