"""Issue 11, items 4 and 5 end to end: the real agent, the real Docker Engine, this host's cgroups.

Pods go through create → run → delete in waves; afterwards no pod cgroup may be left on any
hierarchy (every v1 controller and, on a hybrid host, the cgroup2 `unified` mount, where runc
creates the pod path too) and no pod directory may be left under the root dir. Hostile explicit
uids in static manifests must not let removal reach outside <rootDir>/pods.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, simple_pod

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker

CGROUP_MOUNTS = Path("/sys/fs/cgroup")
WAVES, PER_WAVE = 5, 10
# exits on SIGTERM at once, so deletion does not wait for the kill grace
QUICK_EXIT = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
RESOURCES: list[dict[str, Any]] = [
    {},  # BestEffort
    {"requests": {"cpu": "10m", "memory": "8Mi"}},  # Burstable
    {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}},  # Guaranteed
]


def pod_cgroups_left(cgroup_root: str) -> dict[str, list[str]]:
    """hierarchy -> pod cgroups still below <cgroupRoot>/kubepods (all QoS parents), on every mount."""
    left: dict[str, list[str]] = {}
    for mount in sorted(p for p in CGROUP_MOUNTS.iterdir() if p.is_dir()):
        kubepods = mount / cgroup_root.strip("/") / "kubepods"
        for parent in (kubepods, kubepods / "burstable", kubepods / "besteffort"):
            if parent.is_dir():
                found = [c.name for c in parent.iterdir() if c.is_dir() and c.name.startswith("pod")]
                if found:
                    left.setdefault(mount.name, []).extend(found)
    return left


def churn_pod(name: str, i: int) -> dict[str, Any]:
    p = simple_pod(name, [{"name": "m", "command": QUICK_EXIT, "resources": RESOURCES[i % 3],
                           "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                   terminationGracePeriodSeconds=1, volumes=[{"name": "scratch", "emptyDir": {}}])
    return p


async def test_pod_churn_leaves_no_cgroup_on_any_hierarchy_and_no_pod_dir(agent: AgentProcess) -> None:
    agent.start()
    await agent.wait_up()
    seen: set[str] = set()
    for wave in range(WAVES):
        names = [f"churn{wave}-{i}" for i in range(PER_WAVE)]
        for i, n in enumerate(names):
            agent.put(f"{n}.yaml", churn_pod(n, i))
        for n in names:
            p = await agent.wait_phase(n, "Running", 120)
            seen.add(p["metadata"]["uid"])
        assert (agent.root / "pods").is_dir() and len(list((agent.root / "pods").iterdir())) >= PER_WAVE
        assert "unified" not in {m.name for m in CGROUP_MOUNTS.iterdir()} or pod_cgroups_left(
            agent.cgroup_root).get("unified")  # the path under test exists while pods run
        for n in names:
            (agent.manifests / f"{n}.yaml").unlink()
        for n in names:
            await agent.wait_gone(n, 60)
    assert len(seen) == WAVES * PER_WAVE

    async def all_gone() -> bool:
        return not pod_cgroups_left(agent.cgroup_root) and not list((agent.root / "pods").iterdir())

    try:
        await agent.wait_for("every pod cgroup and pod dir removed", all_gone, 30)
    except AssertionError:
        left = pod_cgroups_left(agent.cgroup_root)
        raise AssertionError(f"left: cgroups {({k: len(v) for k, v in left.items()})}, "
                             f"pod dirs {sorted(p.name for p in (agent.root / 'pods').iterdir())}") from None


@pytest.mark.parametrize("uid", ["..", "../../victim-dir"])
async def test_a_hostile_explicit_uid_never_removes_anything_outside_the_pods_dir(agent: AgentProcess,
                                                                                 uid: str) -> None:
    victim = agent.base / "victim-dir"
    victim.mkdir()
    (victim / "data").write_text("keep")
    agent.root.mkdir(parents=True)
    marker = agent.root / "marker"
    marker.write_text("keep")
    pod = simple_pod("hostile", [{"name": "m", "command": QUICK_EXIT}], terminationGracePeriodSeconds=1,
                     volumes=[{"name": "scratch", "emptyDir": {}}])
    pod["metadata"]["uid"] = uid
    agent.put("hostile.yaml", pod)
    agent.put("plain.yaml", simple_pod("plain", [{"name": "m", "command": QUICK_EXIT}],
                                       terminationGracePeriodSeconds=1))
    agent.start()
    await agent.wait_phase("plain", "Running", 60)
    (agent.manifests / "hostile.yaml").unlink()
    (agent.manifests / "plain.yaml").unlink()
    await agent.wait_gone("plain", 60)
    await agent.wait_gone("hostile", 60)
    assert (victim / "data").read_text() == "keep" and marker.read_text() == "keep"
    assert {p.name for p in agent.base.iterdir()} <= {"manifests", "root", "pod-logs", "container-logs", "config.yaml", "agent.log",
                                                      "victim-dir"}
    assert {"marker", "pods"} <= {p.name for p in agent.root.iterdir()}


async def test_a_second_agent_on_the_same_root_dir_and_cgroup_root_refuses_to_start(agent: AgentProcess) -> None:
    """Two agents on one rootDir / cgroupRoot remove each other's pod cgroups as orphans: the second one stops
    at its rootDir lock, before it touches the runtime or a cgroup, and the first runs on."""
    agent.start()
    await agent.wait_up()
    assert agent.proc is not None
    second = AgentProcess(agent.base / "second", agent.docker_host)
    second.root, second.cgroup_root = agent.root, agent.cgroup_root  # its own ports, node name and manifests
    try:
        second.start()
        assert second.proc is not None
        code = await asyncio.to_thread(second.proc.wait, 15)
        assert code == 1, second.log()
        assert (f"rootDir {agent.root} is in use by another minikubelet (pid {agent.proc.pid}); each agent needs "
                "its own rootDir and cgroupRoot") in second.log()
        assert "Traceback" not in second.log()
    finally:
        second.stop()
        if second._log_fh is not None:
            second._log_fh.close()
    assert agent.proc.poll() is None
    assert (await agent.get_text("/healthz"))[0] == 200
