"""Issue 2 end to end: the real agent process, static pod manifests, the real Docker Engine."""

from __future__ import annotations

import time
from typing import Any

import aiodocker
import aiohttp
import pytest

from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.runtime_view import ExitWatch, RuntimeView

agent = agent_env.agent
docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration

WEB = {
    "name": "web",
    "command": ["sh", "-c", "mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www"],
    "ports": [{"containerPort": 8080, "name": "http"}],
}
CLIENT = {
    "name": "client",
    "command": ["sh", "-c", "until wget -qO- http://127.0.0.1:8080/; do sleep 0.2; done; exec sleep 3600"],
}


def running(p: dict[str, Any]) -> bool:
    return p["status"].get("phase") == "Running" and all(
        "running" in s["state"] for s in p["status"].get("containerStatuses", [])
    )


async def test_pod_runs_with_shared_network_namespace(agent: AgentProcess, docker: aiodocker.Docker,
                                                      runtime_view: RuntimeView) -> None:
    agent.put("web.yaml", simple_pod("web", [dict(WEB), dict(CLIENT)]))
    agent.start()
    pod = await agent.wait_pod("web", running, "Running with both containers running")
    st = pod["status"]
    assert pod["metadata"]["name"] == f"web-{agent.node}"
    assert {c["type"]: c["status"] for c in st["conditions"]} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
        "ContainersReady": "True", "PodScheduled": "True"}
    assert st["qosClass"] == "BestEffort"
    for name in ("web", "client"):
        cs = cstatus(pod, name)
        assert cs["ready"] and cs["started"] and cs["restartCount"] == 0
        assert cs["containerID"].startswith(runtime_view.prefix)
        image = await runtime_view.runtime.image_status(agent_env.BUSYBOX)
        assert image is not None
        if runtime_view.name == "docker":
            assert cs["imageID"].startswith(("docker://sha256:", "docker-pullable://"))
        else:  # containerd: the config digest, or the repo digest reference
            assert cs["imageID"] == image.id or "@sha256:" in cs["imageID"], cs["imageID"]
        # the runtime's reference (the image's first repo tag), one of the test image's tags
        assert cs["image"] == image.repo_tags[0]

    # the client reached the web server over the pod's loopback
    client = container_id(pod, "client")

    async def client_saw_page() -> bool:
        return b"hello-from-web" in await runtime_view.logs(client)

    await agent.wait_for("client output", client_saw_page, 20)

    # the pod IP reported is the sandbox's, and it serves the page to us (same netns as dockerd)
    assert st["podIP"] and st["podIPs"] == [{"ip": st["podIP"]}]
    async with aiohttp.ClientSession() as s, s.get(f"http://{st['podIP']}:8080/") as r:
        assert (await r.text()).strip() == "hello-from-web"

    if runtime_view.name != "docker":
        return  # the rest reads Docker's own view of the containers
    # containers are joined to the sandbox's network namespace, with Docker restarts off
    web = await docker.containers.get(container_id(pod, "web"))
    info = web._container
    assert info["HostConfig"]["NetworkMode"].startswith("container:")
    assert info["HostConfig"]["RestartPolicy"]["Name"] in ("", "no")
    assert info["Name"].startswith(f"/k8s_web_web-{agent.node}_default_")


async def test_edit_replaces_and_delete_stops(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    pod = simple_pod("edit", [{"name": "main", "command": ["sleep", "3600"]}], terminationGracePeriodSeconds=2)
    agent.put("edit.yaml", pod)
    agent.start()
    first = await agent.wait_pod("edit", running, "Running")
    old_uid, old_cid = first["metadata"]["uid"], container_id(first, "main")

    pod["spec"]["containers"][0]["command"] = ["sleep", "3601"]
    agent.put("edit.yaml", pod)
    second = await agent.wait_pod(
        "edit", lambda p: p["metadata"]["uid"] != old_uid and running(p), "replaced by the new version")
    assert container_id(second, "main") != old_cid
    assert not await runtime_view.exists(old_cid)  # the old version is stopped and removed

    (agent.manifests / "edit.yaml").unlink()
    await agent.wait_gone("edit", 30)
    assert await runtime_view.containers_of(second["metadata"]["uid"]) == []


async def test_container_ignoring_sigterm_is_killed_at_grace(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    grace = 3
    agent.put("stubborn.yaml", simple_pod(
        "stubborn", [{"name": "main", "command": ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]}],
        terminationGracePeriodSeconds=grace))
    agent.start()
    pod = await agent.wait_pod("stubborn", running, "Running")
    cid = container_id(pod, "main")
    watch = ExitWatch(runtime_view, cid)
    t0 = time.time()  # the runtime's exit time is wall-clock
    (agent.manifests / "stubborn.yaml").unlink()
    [event] = await watch.all(30)
    took = event.finished_at - t0
    assert event.exit_code == 137
    # SIGKILL comes at the grace period, not before (the file watch adds well under a second)
    assert grace - 0.2 <= took <= grace + 3, took
    await agent.wait_gone("stubborn")


async def test_agent_restart_adopts_running_containers(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    agent.put("keep.yaml", simple_pod("keep", [{"name": "a", "command": ["sleep", "3600"]},
                                               {"name": "b", "command": ["sleep", "3600"]}]))
    agent.put("gone.yaml", simple_pod("gone", [{"name": "a", "command": ["sleep", "3600"]}],
                                      terminationGracePeriodSeconds=1))
    agent.put("dies.yaml", simple_pod("dies", [{"name": "a", "command": ["sleep", "3600"]}]))
    agent.start()
    keep = await agent.wait_pod("keep", running, "Running")
    gone = await agent.wait_pod("gone", running, "Running")
    dies = await agent.wait_pod("dies", running, "Running")
    before = {}
    for n in ("a", "b"):
        c = await runtime_view.status(container_id(keep, n))
        before[c.id] = c.started_at

    agent.kill9()
    # while the agent is down: a manifest is removed and a container dies
    (agent.manifests / "gone.yaml").unlink()
    await runtime_view.runtime.stop_container(container_id(dies, "a"), timeout=0)  # SIGKILL
    # pods outlive the agent
    for cid in before:
        assert await runtime_view.running(cid)

    agent.start()
    await agent.wait_gone("gone", 30)
    gone_uid = gone["metadata"]["uid"]
    await agent.wait_for("gone's containers removed", lambda: _no_containers(runtime_view, gone_uid), 30)
    restarted = await agent.wait_pod(
        "dies", lambda p: cstatus(p, "a")["restartCount"] == 1 and running(p), "restarted after dying")
    assert cstatus(restarted, "a")["lastState"]["terminated"]["exitCode"] == 137
    keep2 = await agent.wait_pod("keep", running, "still Running")
    after = {}
    for n in ("a", "b"):
        c = await runtime_view.status(container_id(keep2, n))
        after[c.id] = c.started_at
    assert after == before  # same containers, never restarted
    assert all(cstatus(keep2, n)["restartCount"] == 0 for n in ("a", "b"))


async def _no_containers(view: RuntimeView, uid: str) -> bool:
    return not await view.containers_of(uid)


async def test_bad_manifest_is_reported_and_isolated(agent: AgentProcess) -> None:
    agent.put("good.yaml", simple_pod("good", [{"name": "main", "command": ["sleep", "3600"]}]))
    agent.put("bad.yaml", simple_pod("bad", [{"name": "main", "command": ["sleep", "3600"],
                                              "ports": [{"containerPort": 70000}]}]))
    agent.put("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
    agent.put(".hidden.yaml", simple_pod("hidden", [{"name": "main", "command": ["sleep", "3600"]}]))
    agent.start()
    good = await agent.wait_pod("good", running, "Running")
    names = [p["metadata"]["name"] for p in await agent.pods()]
    assert names == [f"good-{agent.node}"]
    log = agent.log()
    assert "bad.yaml" in log and "spec.containers[0].ports[0].containerPort" in log
    assert "broken.yaml" in log
    status, metrics = await agent.get_text("/metrics")
    assert status == 200
    line = next(ln for ln in metrics.splitlines() if ln.startswith('minikubelet_static_pod_manifest_errors_total{reason="invalid"}'))
    assert float(line.split()[-1]) >= 2
    # fixing the file brings the pod up; the good pod is untouched
    agent.put("bad.yaml", simple_pod("bad", [{"name": "main", "command": ["sleep", "3600"]}]))
    await agent.wait_pod("bad", running, "Running after the fix")
    again = await agent.pod("good")
    assert again is not None and container_id(again, "main") == container_id(good, "main")


async def test_http_endpoints(agent: AgentProcess) -> None:
    agent.put("m.yaml", simple_pod("m", [{"name": "main", "command": ["sleep", "3600"]}]))
    agent.start()
    await agent.wait_pod("m", running, "Running")
    status, body = await agent.get_text("/healthz")
    assert (status, body) == (200, "ok")
    pods = await agent.get_json("/pods")
    assert pods["kind"] == "PodList" and pods["apiVersion"] == "v1"

    async def gauge_updated() -> bool:
        _, m = await agent.get_text("/metrics")
        return "kubelet_running_pods 1" in m.splitlines()  # client_golang writes 1, not 1.0

    # the relist after the start counts the pod (a vector family appears with its first child, as a kubelet's)
    await agent.wait_for("running pods gauge", gauge_updated, 10)
    _, metrics = await agent.get_text("/metrics")
    for name in ("kubelet_running_pods", "kubelet_running_containers", "kubelet_pod_start_duration_seconds",
                 "kubelet_pod_worker_duration_seconds", "kubelet_runtime_operations_total",
                 "kubelet_runtime_operations_duration_seconds"):
        assert f"# TYPE {name} " in metrics, name
    events = await agent.get_json("/debug/events")
    reasons = {e["reason"] for e in events["items"]}
    assert {"Pulled", "Created", "Started"} <= reasons
    started = next(e for e in events["items"] if e["reason"] == "Started")
    assert started["involvedObject"]["fieldPath"] == "spec.containers{main}"
