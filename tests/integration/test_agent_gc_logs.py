"""Container garbage collection and pod log files on the real agent and Docker Engine."""

from __future__ import annotations

import asyncio
import glob
import os
from typing import Any

import aiodocker
import pytest

from cri.types import ContainerState, ContainerStatus
from minikubelet.base.clock import RealClock
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.log_files import LogFiles
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.runtime_view import RuntimeView, docker_only

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker
runtime_view = views.runtime_view

MAX_SIZE = 64 * 1024
MAX_FILES = 3
ONE_WRITE = 4096  # one json-file record of the chatty container, with room to spare


async def pod_containers(view: RuntimeView, uid: str, name: str) -> list[ContainerStatus]:
    return await view.runtime.list_containers({"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name})


def restart_count(p: dict[str, Any], name: str) -> int:
    return int(cstatus(p, name).get("restartCount", 0))


async def test_a_crash_looping_pod_keeps_exactly_one_dead_container(
    agent: AgentProcess, runtime_view: RuntimeView
) -> None:
    agent.put("crash.yaml", simple_pod("crash", [{"name": "app", "command": ["sh", "-c", "echo attempt; exit 3"]}]))
    agent.start()
    # attempts at 0 s, at once, and after the 10 s backoff; the next one waits 20 s more
    p = await agent.wait_pod("crash", lambda p: restart_count(p, "app") >= 2, "two restarts", timeout=40)
    uid = p["metadata"]["uid"]
    assert len(await pod_containers(runtime_view, uid, "app")) == 3  # the agent's own GC first runs after a minute
    runtime = runtime_view.runtime
    summaries = await runtime.list_summaries()
    every_pod = {s.pod_uid for s in summaries}  # only this pod's surplus may go, nothing of anyone else
    gc = ContainerGC(runtime, RealClock(), LogFiles(str(agent.logs), str(agent.legacy_logs)), lambda: every_pod)
    await gc.collect()
    left = await pod_containers(runtime_view, uid, "app")
    dead = [c for c in left if c.state is not ContainerState.RUNNING]
    assert len(dead) == 1, [c.id for c in left]
    p = await agent.wait_pod("crash", lambda p: True, "status")
    reported = {container_id(p, "app"), str(cstatus(p, "app")["lastState"]["terminated"]["containerID"])}
    assert dead[0].id in {runtime_view.bare(r) for r in reported}
    # only the kept attempts keep their log files and legacy links
    kept = {c.id for c in left}
    links = os.listdir(agent.legacy_logs)
    assert sorted(links) == sorted(f"crash-{agent.node}_default_app-{cid}.log" for cid in kept)
    logs = agent.logs / f"default_crash-{agent.node}_{uid}" / "app"
    counts = {c.annotations["io.kubernetes.container.restartCount"] for c in left}
    assert sorted(os.listdir(logs)) == sorted(f"{n}.log" for n in counts)


def rotated_size(log_path: str) -> tuple[int, int]:
    """(bytes, files) of Docker's json log and its rotated siblings."""
    files = [log_path, *glob.glob(glob.escape(log_path) + ".*")]
    total = present = 0
    for f in files:
        try:  # Docker may rotate a file away between the listing and the stat
            total += os.path.getsize(f)
            present += 1
        except FileNotFoundError:
            continue
    return total, present


@docker_only("the rotation asserted is Docker's json-file log driver's (max-size/max-file); on a CRI runtime the "
             "kubelet rotates the CRI log itself, which the agent does not do yet")
async def test_pod_log_files_links_and_rotation(agent: AgentProcess, docker: aiodocker.Docker) -> None:
    agent.extra = {"containerLogMaxSize": "64Ki", "containerLogMaxFiles": MAX_FILES}
    line = "x" * 200
    agent.put("logs.yaml", simple_pod("logs", [
        {"name": "app", "command": ["sh", "-c", "echo hello-from-app; exec sleep 3600"]},
        {"name": "chatty", "command": ["sh", "-c", f"while true; do echo {line}; done"]},
    ], terminationGracePeriodSeconds=2))
    agent.start()
    p = await agent.wait_pod("logs", lambda p: all("running" in cstatus(p, c)["state"] for c in ("app", "chatty")),
                             "both running")
    uid, full = p["metadata"]["uid"], p["metadata"]["name"]
    pod_dir = agent.logs / f"default_{full}_{uid}"
    assert sorted(os.listdir(pod_dir)) == ["app", "chatty"]
    app_id = container_id(p, "app")
    app_log = pod_dir / "app" / "0.log"
    docker_log = (await (await docker.containers.get(app_id)).show())["LogPath"]
    assert os.readlink(app_log) == docker_log
    legacy = agent.legacy_logs / f"{full}_default_app-{app_id}.log"
    assert os.readlink(legacy) == str(app_log)

    async def logged() -> bool:
        return b"hello-from-app" in legacy.read_bytes()

    await agent.wait_for("app's line through the legacy link", logged, timeout=10)

    chatty_log = os.path.realpath(pod_dir / "chatty" / "0.log")
    bound = MAX_SIZE * MAX_FILES + ONE_WRITE
    most_files = 0
    for _ in range(20):
        size, files = rotated_size(chatty_log)
        assert size <= bound
        most_files = max(most_files, files)
        await asyncio.sleep(0.2)
    assert most_files == MAX_FILES  # it did rotate: unbounded it would be one ever-growing file

    os.remove(agent.manifests / "logs.yaml")
    await agent.wait_gone("logs", timeout=60)

    async def logs_gone() -> bool:
        return not pod_dir.exists() and os.listdir(agent.legacy_logs) == []

    await agent.wait_for("pod log dir and links removed", logs_gone, timeout=20)
