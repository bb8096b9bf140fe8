"""Issue 17 item 1, end to end: node-pressure eviction by the real agent joined to the test API server, on
the real Docker Engine, with real memory and a real filesystem running out.

- Memory: the pods get little memory (systemReserved = capacity - 600Mi: the `kubepods` cgroup is limited
  to 600Mi; evictionHard memory.available 200Mi, copied to allocatableMemory.available, makes the node's
  allocatable 400Mi). A pod filling memory-backed emptyDirs with 500Mi crosses the threshold (the pods'
  working set above 400Mi) without reaching the cgroup's limit; the memcg notification on kubepods wakes
  the eviction manager at once. The hog is Failed/Evicted with upstream's message, the
  DisruptionTarget condition and an Evicted Event; the Node reports MemoryPressure; a BestEffort pod is
  refused meanwhile (the condition holds for evictionPressureTransitionPeriod).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError, Client
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, JoinedAgent, stop_and_clean

docker = agent_env.docker

pytestmark = pytest.mark.integration

MI = 2**20


def _pod(agent: AgentProcess, name: str, command: str, requests: dict[str, str] | None = None,
         **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", command]}
    if requests:
        container["resources"] = {"requests": requests}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{agent.node}", "namespace": "default"},
            "spec": {"nodeName": agent.node, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 30, "containers": [container], **spec}}


async def _get(admin: Client, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
    try:
        return await admin.get(plural, name, namespace)
    except ApiStatusError:
        return None


def _mem_total() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal")


async def _wait_phase(agent: AgentProcess, admin: Client, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        pod = await _get(admin, "pods", name, "default")
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == phase else None

    result: dict[str, Any] = await agent.wait_for(f"{name} {phase} in the API", check, timeout=timeout)
    return result


def _condition(node: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in node["status"]["conditions"] if c["type"] == ctype)


async def test_memory_hog_is_evicted_and_best_effort_pods_are_refused(tmp_path: Path, docker: aiodocker.Docker) -> None:
    # workloads: the node lifecycle controller, which taints the Node from its pressure conditions
    async with agent_env.running_api(tmp_path / "api", max_watch_seconds=10, workloads=True) as api:
        await _memory_hog(tmp_path, api, docker)


async def _memory_hog(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.extra = {
        "systemReserved": {"memory": str(_mem_total() - 600 * MI)},
        "evictionHard": {"memory.available": "200Mi"},
        "kernelMemcgNotification": True,
        "nodeStatusUpdateFrequency": "2s",
    }
    admin = api.admin()
    agent.start()
    try:
        node = await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
        assert node["status"]["allocatable"]["memory"] == "400Mi"
        assert _condition(node, "MemoryPressure")["status"] == "False"
        # two tmpfs volumes: each is sized to the node's allocatable memory (400Mi), the hog needs more
        manifest = _pod(agent, "hog", "for d in /a /b; do dd if=/dev/zero of=$d/zeros bs=1M count=250; done; "
                        "exec sleep 100000", requests={"memory": "10Mi"},
                        volumes=[{"name": n, "emptyDir": {"medium": "Memory"}} for n in ("a", "b")])
        manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": n, "mountPath": f"/{n}"} for n in ("a", "b")]
        hog = await admin.create(manifest)
        name = hog["metadata"]["name"]
        started = time.monotonic()
        pod = await _wait_phase(agent, admin, name, "Failed", timeout=60)
        took = time.monotonic() - started
        status = pod["status"]
        assert status["reason"] == "Evicted"
        m = re.fullmatch(r"The node was low on resource: memory\. Threshold quantity: 200Mi, available: (\S+)\. "
                         r"Container hog was using (\S+), request is 10Mi, has larger consumption of memory\. ",
                         status["message"])
        assert m, status["message"]
        cond = next(c for c in status["conditions"] if c["type"] == "DisruptionTarget")
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", "TerminationByKubelet", status["message"])
        events = (await admin.list("events", "default"))["items"]
        assert any(e["involvedObject"]["name"] == name and e["reason"] == "Evicted" and e["type"] == "Warning"
                   and e["message"] == status["message"] for e in events), [e["reason"] for e in events]

        async def pressure() -> dict[str, Any] | None:
            n = await _get(admin, "nodes", agent.node)
            return n if n is not None and _condition(n, "MemoryPressure")["status"] == "True" else None

        node = await agent.wait_for("MemoryPressure on the Node", pressure, timeout=20)
        cond = _condition(node, "MemoryPressure")
        assert (cond["reason"], cond["message"]) == ("KubeletHasInsufficientMemory",
                                                     "kubelet has insufficient memory available")

        async def tainted() -> bool:
            n = await _get(admin, "nodes", agent.node)
            return n is not None and {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"} in (
                n["spec"].get("taints") or [])

        await agent.wait_for("the memory-pressure taint", tainted, timeout=10)

        best_effort = await admin.create(_pod(agent, "besteffort", "exec sleep 100000"))
        pod = await _wait_phase(agent, admin, best_effort["metadata"]["name"], "Failed", timeout=30)
        assert (pod["status"]["reason"], pod["status"]["message"]) == (
            "Evicted", "Pod was rejected: The node had condition: [MemoryPressure]. ")
        burstable = await admin.create(_pod(agent, "burstable", "exec sleep 100000", requests={"memory": "10Mi"}))
        await _wait_phase(agent, admin, burstable["metadata"]["name"], "Running", timeout=30)
        print(f"hog evicted {took:.1f}s after creation: {status['message']!r}")
    finally:
        await stop_and_clean(agent, docker)


def _volume_pod(agent: AgentProcess, name: str, command: str, volume: dict[str, Any],
                **container: Any) -> dict[str, Any]:
    pod = _pod(agent, name, command, volumes=[{"name": "scratch", **volume}])
    pod["spec"]["containers"][0].update(volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}], **container)
    return pod


async def test_disk_pressure_and_local_storage_limits_evict(tmp_path: Path, docker: aiodocker.Docker) -> None:
    """nodefs is the agent's root dir on a 100Mi tmpfs the test mounts; evictionHard nodefs.available < 40%."""
    async with agent_env.running_api(tmp_path / "api", max_watch_seconds=10, workloads=True) as api:
        agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
        agent.root.mkdir(parents=True)
        await asyncio.to_thread(subprocess.run, ["mount", "-t", "tmpfs", "-o", "size=100m", "mkl-evict17-nodefs",
                                                 str(agent.root)], check=True)
        try:
            await _disk_pressure(agent, api, docker)
        finally:
            await asyncio.to_thread(subprocess.run, ["umount", "-l", str(agent.root)], check=False)


async def _disk_pressure(agent: JoinedAgent, api: ApiServer, docker: aiodocker.Docker) -> None:
    # imageMinimumGCAge: the reclaim before eviction removes no image of the shared test engine
    agent.extra = {"evictionHard": {"memory.available": "100Mi", "nodefs.available": "40%"},
                   "nodeStatusUpdateFrequency": "2s", "imageMinimumGCAge": "1h",
                   "volumeStatsAggPeriod": "5s"}  # emptyDirs measured within seconds, not 1-2 min
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
        # an emptyDir's sizeLimit and a container's ephemeral-storage limit (its logs count) are enforced by
        # eviction: grace 1, no DisruptionTarget condition (no node pressure), as upstream
        limited = await admin.create(_volume_pod(
            agent, "limited", "dd if=/dev/zero of=/scratch/f bs=1M count=8; exec sleep 100000",
            {"emptyDir": {"sizeLimit": "5Mi"}}))
        # two containers: the pod's total limit (25Mi) holds, the loud container's own (5Mi) does not
        loud = _pod(agent, "loud", "head -c 6000000 /dev/zero | tr '\\0' x; exec sleep 100000")
        quiet = {**loud["spec"]["containers"][0], "name": "quiet", "command": ["sleep", "100000"],
                 "resources": {"limits": {"ephemeral-storage": "20Mi"}}}
        loud["spec"]["containers"][0]["resources"] = {"limits": {"ephemeral-storage": "5Mi"}}
        loud["spec"]["containers"].append(quiet)
        loud = await admin.create(loud)
        # writing into its own root filesystem: the writable layer (Docker's SizeRw) is ephemeral storage; with
        # one container the pod's total is checked first, as upstream
        rooted = _pod(agent, "rooted", "dd if=/dev/zero of=/var/fill bs=1M count=8; exec sleep 100000")
        rooted["spec"]["containers"][0]["resources"] = {"limits": {"ephemeral-storage": "5Mi"}}
        rooted = await admin.create(rooted)
        for pod, message in (
                (limited, 'Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". '),
                (loud, 'Container loud exceeded its local ephemeral storage limit "5Mi". '),
                (rooted, "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. ")):
            got = await _wait_phase(agent, admin, pod["metadata"]["name"], "Failed", timeout=40)
            assert (got["status"]["reason"], got["status"]["message"]) == ("Evicted", message)
            assert not any(c["type"] == "DisruptionTarget" for c in got["status"].get("conditions") or [])

        # nodefs: 70Mi into a disk emptyDir leaves less than 40% of the 100Mi tmpfs
        filler = await admin.create(_volume_pod(
            agent, "filler", "dd if=/dev/zero of=/scratch/f bs=1M count=70; exec sleep 100000",
            {"emptyDir": {}}))
        got = await _wait_phase(agent, admin, filler["metadata"]["name"], "Failed", timeout=40)
        status = got["status"]
        assert status["reason"] == "Evicted"
        assert re.fullmatch(r"The node was low on resource: ephemeral-storage\. Threshold quantity: 40Mi, "
                            r"available: \d+(Ki|Mi)?\. Container filler was using \d+(Ki|Mi)?, request is 0, has larger "
                            r"consumption of ephemeral-storage\. ", status["message"]), status["message"]
        cond = next(c for c in status["conditions"] if c["type"] == "DisruptionTarget")
        assert (cond["reason"], cond["message"]) == ("TerminationByKubelet", status["message"])

        async def pressure() -> dict[str, Any] | None:
            n = await _get(admin, "nodes", agent.node)
            ok = n is not None and _condition(n, "DiskPressure")["status"] == "True" and {
                "key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"} in (n["spec"].get("taints") or [])
            return n if ok else None

        node = await agent.wait_for("DiskPressure and its taint on the Node", pressure, timeout=20)
        cond = _condition(node, "DiskPressure")
        assert (cond["reason"], cond["message"]) == ("KubeletHasDiskPressure", "kubelet has disk pressure")
        # under disk pressure every pod that is not critical is refused, whatever its QoS class
        burstable = await admin.create(_pod(agent, "late", "exec sleep 100000", requests={"memory": "10Mi"}))
        got = await _wait_phase(agent, admin, burstable["metadata"]["name"], "Failed", timeout=30)
        assert (got["status"]["reason"], got["status"]["message"]) == (
            "Evicted", "Pod was rejected: The node had condition: [DiskPressure]. ")
    finally:
        await stop_and_clean(agent, docker)


def _pid_headroom() -> int:
    """pid.available as the agent observes it: pid_max minus the kernel's task count (/proc/loadavg)."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    tasks = int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    return pid_max - tasks


async def test_a_pid_hog_is_evicted_under_pid_pressure(tmp_path: Path, docker: aiodocker.Docker) -> None:
    """pid.available crosses a threshold set 150 below the host's headroom when a pod starts 400 processes:
    the hog (the pod with the most processes) is evicted with upstream's message, the Node reports PIDPressure,
    and a new pod is refused (any pressure but memory refuses all non-critical pods)."""
    async with agent_env.running_api(tmp_path / "api", max_watch_seconds=10) as api:
        agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
        threshold = _pid_headroom() - 150
        agent.extra = {"evictionHard": {"pid.available": str(threshold)}, "nodeStatusUpdateFrequency": "2s"}
        admin = api.admin()
        agent.start()
        try:
            node = await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
            assert _condition(node, "PIDPressure")["status"] == "False"
            quiet = await admin.create(_pod(agent, "quiet", "exec sleep 100000"))
            await _wait_phase(agent, admin, quiet["metadata"]["name"], "Running", timeout=60)
            hog = await admin.create(_pod(agent, "pidhog", "i=0; while [ $i -lt 400 ]; do sleep 100000 & "
                                          "i=$((i+1)); done; exec sleep 100000"))
            name = hog["metadata"]["name"]
            pod = await _wait_phase(agent, admin, name, "Failed", timeout=90)
            status = pod["status"]
            assert status["reason"] == "Evicted"
            m = re.fullmatch(rf"The node was low on resource: pids\. Threshold quantity: {threshold}, "
                             r"available: (\d+)\. ", status["message"])
            assert m and int(m.group(1)) < threshold, status["message"]
            cond = next(c for c in status["conditions"] if c["type"] == "DisruptionTarget")
            assert (cond["status"], cond["reason"]) == ("True", "TerminationByKubelet")

            async def pressure() -> dict[str, Any] | None:
                n = await _get(admin, "nodes", agent.node)
                return n if n is not None and _condition(n, "PIDPressure")["status"] == "True" else None

            node = await agent.wait_for("PIDPressure on the Node", pressure, timeout=20)
            cond = _condition(node, "PIDPressure")
            assert (cond["reason"], cond["message"]) == ("KubeletHasInsufficientPID",
                                                         "kubelet has insufficient PID available")
            late = await admin.create(_pod(agent, "late", "exec sleep 100000", requests={"memory": "10Mi"}))
            pod = await _wait_phase(agent, admin, late["metadata"]["name"], "Failed", timeout=30)
            assert (pod["status"]["reason"], pod["status"]["message"]) == (
                "Evicted", "Pod was rejected: The node had condition: [PIDPressure]. ")
            still = await _get(admin, "pods", quiet["metadata"]["name"], "default")
            assert still is not None and still["status"]["phase"] == "Running"  # one pod per interval: the hog
        finally:
            await stop_and_clean(agent, docker)
