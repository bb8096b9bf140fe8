"""Issue 5 end to end: pod cgroups and limits on this host's real cgroup v1 kernel."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiodocker
import pytest

from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker

CG = Path("/sys/fs/cgroup")


def v1_only() -> None:
    if not (CG / "memory" / "memory.limit_in_bytes").exists():
        pytest.skip("this host does not run cgroup v1 (the v2 run of these tests happens in the VM)")


def pod_dir(a: AgentProcess, controller: str, qos_parent: str, uid: str) -> Path:
    base = CG / controller / a.cgroup_root.lstrip("/") / "kubepods"
    return base / qos_parent / f"pod{uid}" if qos_parent else base / f"pod{uid}"


def read(p: Path) -> str:
    return p.read_text().strip()


def res(cpu: str | None = None, mem: str | None = None, lcpu: str | None = None, lmem: str | None = None) -> dict:
    r: dict = {}
    if cpu or mem:
        r["requests"] = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v}
    if lcpu or lmem:
        r["limits"] = {k: v for k, v in (("cpu", lcpu), ("memory", lmem)) if v}
    return r


async def test_qos_classes_land_under_the_right_parents(agent: AgentProcess) -> None:
    v1_only()
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

    g = pod_dir(agent, "memory", "", pods["g"]["metadata"]["uid"])
    assert int(read(g / "memory.limit_in_bytes")) == 64 * 2**20
    gc = pod_dir(agent, "cpu", "", pods["g"]["metadata"]["uid"])
    assert read(gc / "cpu.shares") == "102"  # 100m × 1024 / 1000
    assert read(gc / "cpu.cfs_quota_us") == "10000" and read(gc / "cpu.cfs_period_us") == "100000"
    # the container sits inside its pod cgroup, with its own limit
    cid = container_id(pods["g"], "m")
    assert int(read(g / cid / "memory.limit_in_bytes")) == 64 * 2**20

    b = pod_dir(agent, "memory", "burstable", pods["b"]["metadata"]["uid"])
    assert int(read(b / "memory.limit_in_bytes")) == 128 * 2**20
    assert read(pod_dir(agent, "cpu", "burstable", pods["b"]["metadata"]["uid"]) / "cpu.shares") == "256"
    assert read(pod_dir(agent, "cpu", "burstable", pods["b"]["metadata"]["uid"]) / "cpu.cfs_quota_us") == "-1"

    be = pod_dir(agent, "cpu", "besteffort", pods["be"]["metadata"]["uid"])
    assert read(be / "cpu.shares") == "2"
    assert read(be.parent / "cpu.shares") == "2"  # the BestEffort parent gets the minimal weight
    # the sandbox is in the pod cgroup too: two tasks (pause + sleep) in a one-container pod
    assert len(read(pod_dir(agent, "pids", "besteffort", pods["be"]["metadata"]["uid"]) / "cgroup.procs").split()) == 0
    procs = [p for p in pod_dir(agent, "pids", "besteffort", pods["be"]["metadata"]["uid"]).rglob("cgroup.procs")]
    assert sum(len(read(p).split()) for p in procs) == 2

    for n in ("g", "b", "be"):
        (agent.manifests / f"{n}.yaml").unlink()
    for n in ("g", "b", "be"):
        await agent.wait_gone(n, 30)

    async def cgroups_gone() -> bool:
        return not any(pod_dir(agent, ctrl, q, pods[n]["metadata"]["uid"]).exists()
                       for ctrl in ("memory", "cpu", "pids") for n, q in (("g", ""), ("b", "burstable"),
                                                                          ("be", "besteffort")))

    await agent.wait_for("pod cgroups removed", cgroups_gone, 20)


async def test_memory_limit_oom_kills_and_restarts(agent: AgentProcess) -> None:
    v1_only()
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
    pod_cg = pod_dir(agent, "memory", "burstable", p["metadata"]["uid"])
    assert int(read(pod_cg / "memory.limit_in_bytes")) == 32 * 2**20
    assert 28 * 2**20 <= int(read(pod_cg / "memory.max_usage_in_bytes")) <= 32 * 2**20


async def test_cpu_limit_is_enforced(agent: AgentProcess, docker: aiodocker.Docker) -> None:
    v1_only()
    agent.put("spin.yaml", simple_pod("spin", [{
        "name": "spin", "command": ["sh", "-c", "while :; do :; done"],
        "resources": res(cpu="200m", lcpu="200m", mem="16Mi", lmem="16Mi")}], terminationGracePeriodSeconds=1))
    agent.start()
    p = await agent.wait_pod("spin", lambda p: p["status"].get("phase") == "Running", "Running")
    usage = pod_dir(agent, "cpuacct", "", p["metadata"]["uid"]) / container_id(p, "spin") / "cpuacct.usage"
    await asyncio.sleep(1.0)
    u0, t0 = int(read(usage)), time.monotonic()
    await asyncio.sleep(3.0)
    u1, t1 = int(read(usage)), time.monotonic()
    cores = (u1 - u0) / 1e9 / (t1 - t0)
    assert 0.14 <= cores <= 0.26, cores
