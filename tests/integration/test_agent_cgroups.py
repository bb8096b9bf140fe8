"""Issue 5 end to end: pod cgroups and limits on the real kernel (v1 here; the same tests run on v2 in the VM)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiodocker
import pytest

from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.cgroup_reader import CgroupReader

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker

def reader(a: AgentProcess) -> CgroupReader:
    return CgroupReader(a.cgroup_root)


def res(cpu: str | None = None, mem: str | None = None, lcpu: str | None = None, lmem: str | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {}
    if cpu or mem:
        r["requests"] = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v}
    if lcpu or lmem:
        r["limits"] = {k: v for k, v in (("cpu", lcpu), ("memory", lmem)) if v}
    return r


async def test_qos_classes_land_under_the_right_parents(agent: AgentProcess) -> None:
    sleep = ["sleep", "3600"]
    agent.put("g.yaml", simple_pod("g", [{"name": "m", "command": sleep,
                                          "resources": res(lcpu="100m", lmem="64Mi")}], terminationGracePeriodSeconds=1))
    agent.put("b.yaml", simple_pod("b", [{"name": "m", "command": sleep,
                                          "resources": res(cpu="250m", mem="32Mi", lmem="128Mi")}],
                                   terminationGracePeriodSeconds=1))
    agent.put("be.yaml", simple_pod("be", [{"name": "m", "command": sleep}], terminationGracePeriodSeconds=1))
    agent.start()
    pods = {}
    for n in ("g", "b", "be"):
        pods[n] = await agent.wait_pod(n, lambda p: p["status"].get("phase") == "Running", "Running")
    assert [pods[n]["status"]["qosClass"] for n in ("g", "b", "be")] == ["Guaranteed", "Burstable", "BestEffort"]

    r = reader(agent)
    uid = {n: pods[n]["metadata"]["uid"] for n in pods}
    g = r.pod("", uid["g"])
    assert r.memory_limit(g) == 64 * 2**20
    assert r.cpu_shares_are(g, 102)  # 100m × 1024 / 1000
    assert r.cpu_quota(g) == (10000, 100000)
    # the container sits inside its pod cgroup, with its own limit
    assert r.memory_limit(g / container_id(pods["g"], "m")) == 64 * 2**20

    b = r.pod("burstable", uid["b"])
    assert r.memory_limit(b) == 128 * 2**20
    assert r.cpu_shares_are(b, 256)
    assert r.cpu_quota(b)[0] == -1

    be = r.pod("besteffort", uid["be"])
    assert r.cpu_shares_are(be, 2)
    assert r.cpu_shares_are(be.parent, 2)  # the BestEffort parent gets the minimal weight
    assert r.memory_limit(be) is None
    # the sandbox is in the pod cgroup too: pause + sleep
    assert r.process_count(be) == 2

    for n in ("g", "b", "be"):
        (agent.manifests / f"{n}.yaml").unlink()
    for n in ("g", "b", "be"):
        await agent.wait_gone(n, 30)

    async def cgroups_gone() -> bool:
        return not any(r.exists(r.pod(q, uid[n], ctrl))
                       for ctrl in ("memory", "cpu", "pids") for n, q in (("g", ""), ("b", "burstable"),
                                                                          ("be", "besteffort")))

    await agent.wait_for("pod cgroups removed", cgroups_gone, 20)


async def test_memory_limit_oom_kills_and_restarts(agent: AgentProcess) -> None:
    agent.put("oom.yaml", simple_pod("oom", [{
        "name": "hog", "command": ["sh", "-c", "echo start; exec dd if=/dev/zero of=/dev/null bs=128M count=1"],
        "resources": res(mem="16Mi", lmem="32Mi")}], terminationGracePeriodSeconds=1))
    agent.start()
    p = await agent.wait_pod("oom", lambda p: cstatus(p, "hog")["restartCount"] >= 1
                             and "terminated" in cstatus(p, "hog")["lastState"], "OOM-killed and restarted", 60)
    last = cstatus(p, "hog")["lastState"]["terminated"]
    assert last["exitCode"] == 137
    assert last["reason"] == "OOMKilled"
    # the kernel enforced it: the pod cgroup's peak usage reached the 32 Mi limit and never passed it
    # (cgroup v1 counts oom_kill only in the container's own cgroup, which runc removes on exit)
    r = reader(agent)
    pod_cg = r.pod("burstable", p["metadata"]["uid"])
    assert r.memory_limit(pod_cg) == 32 * 2**20
    assert 28 * 2**20 <= r.memory_peak(pod_cg) <= 32 * 2**20


async def test_cpu_limit_is_enforced(agent: AgentProcess, docker: aiodocker.Docker) -> None:
    agent.put("spin.yaml", simple_pod("spin", [{
        "name": "spin", "command": ["sh", "-c", "while :; do :; done"],
        "resources": res(cpu="200m", lcpu="200m", mem="16Mi", lmem="16Mi")}], terminationGracePeriodSeconds=1))
    agent.start()
    p = await agent.wait_pod("spin", lambda p: p["status"].get("phase") == "Running", "Running")
    r = reader(agent)
    cg = r.pod("", p["metadata"]["uid"]) / container_id(p, "spin")
    await asyncio.sleep(1.0)
    u0, t0 = r.cpu_usage_seconds(cg), time.monotonic()
    await asyncio.sleep(3.0)
    u1, t1 = r.cpu_usage_seconds(cg), time.monotonic()
    cores = (u1 - u0) / (t1 - t0)
    assert 0.14 <= cores <= 0.26, cores
