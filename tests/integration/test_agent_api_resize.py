"""Issue 30, in-place pod resize, end to end on both runtimes: the joined agent, `kubectl patch --subresource resize`
through the test API server, and the kernel's cgroup v1 files read back (`/proc/<pid>/cgroup` of the container's
process, and the pod cgroup). The status says a new value only once the kernel holds it; a resize that does not
fit is Deferred and allocated when a pod goes; a pod-level one is Infeasible here; RestartContainer restarts only
its container; a memory limit below what is in use is refused with PodResizeInProgress Error."""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import Client
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent, registered_node, stop_and_clean
from tests.integration.kubectl_cli import kubectl
from tests.integration.runtime_view import RuntimeView
from tests.metrics_reference import parse

docker = agent_env.docker
runtime_view = views.runtime_view
api = agent_env.api

pytestmark = pytest.mark.integration

Json = dict[str, Any]
SLEEPER = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]


def container(name: str, requests: Json, limits: Json, **extra: Any) -> Json:
    return {"name": name, "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent", "command": SLEEPER,
            "resources": {"requests": requests, "limits": limits}, **extra}


def pod(name: str, node: str, *containers: Json, **spec: Any) -> Json:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 2,
                     "containers": list(containers), **spec}}


def cgroup_dir(pid: int, controller: str) -> Path:
    """The process's cgroup v1 directory of one controller (cpu shares its hierarchy with cpuacct)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            mount = "cpu,cpuacct" if "cpuacct" in controllers and controller == "cpu" else controllers
            base = Path("/sys/fs/cgroup") / mount
            if not base.exists():
                base = Path("/sys/fs/cgroup") / controller
            return base / path.lstrip("/")
    raise AssertionError(f"no {controller} cgroup for {pid}")


def read_int(path: Path) -> int:
    return int(path.read_text().strip())


class Kernel:
    """What the kernel holds for one container and its pod (the container's parent cgroup)."""

    def __init__(self, pid: int) -> None:
        self.cpu = cgroup_dir(pid, "cpu")
        self.memory = cgroup_dir(pid, "memory")

    def quota(self, pod_level: bool = False) -> int:
        return read_int((self.cpu.parent if pod_level else self.cpu) / "cpu.cfs_quota_us")

    def shares(self, pod_level: bool = False) -> int:
        return read_int((self.cpu.parent if pod_level else self.cpu) / "cpu.shares")

    def memory_limit(self, pod_level: bool = False) -> int:
        return read_int((self.memory.parent if pod_level else self.memory) / "memory.limit_in_bytes")

    def memory_usage(self) -> int:
        return read_int(self.memory / "memory.usage_in_bytes")


async def running_pod(agent: JoinedAgent, admin: Client, name: str) -> Json:
    async def running() -> Json | None:
        p = await admin.get("pods", name, "default")
        statuses = (p.get("status") or {}).get("containerStatuses") or []
        ok = p["status"].get("phase") == "Running" and statuses and all("running" in s["state"] for s in statuses)
        return p if ok else None

    found: Json = await agent.wait_for(f"{name} Running", running, timeout=90)
    return found


async def kernel_of(view: RuntimeView, status: Json) -> Kernel:
    return Kernel((await view.status(status["containerID"])).pid)


def conditions(p: Json) -> dict[str, Json]:
    return {c["type"]: c for c in (p.get("status") or {}).get("conditions") or []}


def resize_patch(name: str, requests: Json, limits: Json) -> str:
    return json.dumps({"spec": {"containers": [{"name": name, "resources": {"requests": requests,
                                                                              "limits": limits}}]}})


class Kubectl:
    def __init__(self, api: ApiServer, base: Path) -> None:
        self.kubeconfig = api.write_kubeconfig(base / "admin.conf", api.admin_identity())
        self.cache = base / "kubectl-cache"

    async def resize(self, pod_name: str, patch: str) -> None:
        code, out, err = await kubectl(self.kubeconfig, self.cache, "patch", "pod", pod_name, "--subresource",
                                       "resize", "-p", patch)
        assert code == 0, (out, err)
        assert "patched" in out, out


async def started_agent(tmp_path: Path, api: ApiServer) -> JoinedAgent:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.start()

    await agent.wait_for("the Node", functools.partial(registered_node, api.admin(), agent.node), timeout=60)
    return agent


@dataclass
class ResizeNode:
    """A joined agent, the admin client and kubectl; the agent stopped and its pods removed afterwards."""
    agent: JoinedAgent
    admin: Client
    ctl: Kubectl


@pytest.fixture
async def joined(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> AsyncIterator[ResizeNode]:
    agent = await started_agent(tmp_path, api)
    try:
        yield ResizeNode(agent, api.admin(), Kubectl(api, tmp_path))
    finally:
        await stop_and_clean(agent, docker)


async def settle(agent: JoinedAgent, admin: Client, name: str, want: Any, kernel_ok: Any, what: str) -> Json:
    """Poll the API until `want(pod)`; at every poll where the status already reports the new values the kernel
    must hold them too (`kernel_ok(pod)` read after the API answered): the status never runs ahead."""
    async def check() -> Json | None:
        p = await admin.get("pods", name, "default")
        if want(p):
            assert kernel_ok(p), f"{what}: the status reports the new values before the kernel holds them"
            return p
        return None

    found: Json = await agent.wait_for(what, check, timeout=60, interval=0.05)
    return found


async def test_cpu_and_memory_up_and_down_in_place(joined: ResizeNode, runtime_view: RuntimeView) -> None:
    agent, admin, ctl = joined.agent, joined.admin, joined.ctl
    await admin.create(pod("rs", agent.node, container("app", {"cpu": "100m", "memory": "32Mi"},
                                                       {"cpu": "100m", "memory": "32Mi"})))
    first = await running_pod(agent, admin, "rs")
    status = first["status"]["containerStatuses"][0]
    cid = status["containerID"]
    assert status["resources"] == {"limits": {"cpu": "100m", "memory": "32Mi"},
                                   "requests": {"cpu": "100m", "memory": "32Mi"}}
    kernel = await kernel_of(runtime_view, status)
    assert (kernel.quota(), kernel.shares(), kernel.memory_limit()) == (10_000, 102, 32 << 20)
    assert kernel.quota(pod_level=True) == 10_000

    def res(p: Json) -> Json:
        return p["status"]["containerStatuses"][0]["resources"]  # type: ignore[no-any-return]

    steps: list[tuple[str, Json, Json, Any]] = [
        ("cpu up", {"cpu": "200m", "memory": "32Mi"}, {"cpu": "200m", "memory": "32Mi"},
         lambda: kernel.quota() == 20_000 and kernel.shares() == 204 and kernel.quota(pod_level=True) == 20_000),
        ("memory up", {"cpu": "200m", "memory": "64Mi"}, {"cpu": "200m", "memory": "64Mi"},
         lambda: kernel.memory_limit() == 64 << 20 and kernel.memory_limit(pod_level=True) == 64 << 20),
        ("memory down", {"cpu": "200m", "memory": "48Mi"}, {"cpu": "200m", "memory": "48Mi"},
         lambda: kernel.memory_limit() == 48 << 20 and kernel.memory_limit(pod_level=True) == 48 << 20),
        ("cpu down", {"cpu": "150m", "memory": "48Mi"}, {"cpu": "150m", "memory": "48Mi"},
         lambda: kernel.quota() == 15_000 and kernel.shares() == 153 and kernel.quota(pod_level=True) == 15_000),
    ]
    took: dict[str, float] = {}
    for generation, (what, requests, limits, kernel_holds) in enumerate(steps, start=2):
        start = time.monotonic()
        await ctl.resize("rs", resize_patch("app", requests, limits))

        def done(p: Json, limits: Json = limits, generation: int = generation) -> bool:
            return (res(p).get("limits") == limits and "PodResizeInProgress" not in conditions(p)
                    and p["status"].get("observedGeneration") == generation)

        p = await settle(agent, admin, "rs", done, lambda _p, k=kernel_holds: k(), what)
        took[what] = time.monotonic() - start
        cs = p["status"]["containerStatuses"][0]
        assert (cs["containerID"], cs["restartCount"]) == (cid, 0), f"{what}: restarted"
        assert cs["allocatedResources"] == requests
        assert res(p) == {"limits": limits, "requests": requests}
        assert p["metadata"]["generation"] == generation
    assert max(took.values()) < 10, took
    events = [e for e in (await admin.list("events", "default"))["items"]
              if e["involvedObject"]["name"] == "rs" and e["reason"].startswith("Resize")]
    assert {"ResizeStarted", "ResizeCompleted"} <= {e["reason"] for e in events}
    completed = [e["message"] for e in events if e["reason"] == "ResizeCompleted"]
    assert any(m.startswith('Pod resize completed: {"containers":[{"name":"app","resources":{"limits":'
                            '{"cpu":"150m","memory":"48Mi"}') and m.endswith('"generation":5}')
               for m in completed), completed
    code, metrics = await agent.get_text("/metrics")
    assert code == 200
    values = {(x.name, tuple(sorted(x.labels.items()))): x.value for x in parse(metrics)[1]}
    for name, labels, value in (
            ("kubelet_container_requested_resizes_total",
             {"operation": "increase", "requirement": "limits", "resource": "cpu"}, 1),
            ("kubelet_container_requested_resizes_total",
             {"operation": "decrease", "requirement": "limits", "resource": "memory"}, 1),
            ("kubelet_pod_resize_duration_milliseconds_count", {"success": "true"}, 4),
            ("kubelet_pod_in_progress_resizes", {}, 0)):
        assert values.get((name, tuple(sorted(labels.items())))) == value, (name, labels)


async def test_deferred_until_a_pod_goes_and_pod_level_infeasible(joined: ResizeNode, runtime_view: RuntimeView) -> None:
    agent, admin, ctl = joined.agent, joined.admin, joined.ctl
    node = await admin.get("nodes", agent.node)
    allocatable = int(float(node["status"]["allocatable"]["cpu"]) * 1000)
    await admin.create(pod("rs", agent.node, container("app", {"cpu": "100m", "memory": "32Mi"},
                                                       {"cpu": "100m", "memory": "32Mi"})))
    await admin.create(pod("hog", agent.node, container("app", {"cpu": "500m"}, {})))
    await running_pod(agent, admin, "hog")
    first = await running_pod(agent, admin, "rs")
    kernel = await kernel_of(runtime_view, first["status"]["containerStatuses"][0])
    want = allocatable - 300  # fits once the hog's 500m are free
    await ctl.resize("rs", resize_patch("app", {"cpu": f"{want}m"}, {"cpu": f"{want}m"}))

    async def deferred() -> Json | None:
        p = await admin.get("pods", "rs", "default")
        c = conditions(p).get("PodResizePending")
        return c if c is not None and c.get("reason") == "Deferred" else None

    pending = await agent.wait_for("PodResizePending Deferred", deferred, timeout=30)
    assert pending["message"] == (f"Node didn't have enough resource: cpu, requested: {want}, used: 500, "
                                  f"capacity: {allocatable}")
    assert (pending["status"], pending["observedGeneration"]) == ("True", 2)
    assert kernel.quota() == 10_000  # nothing changed in the kernel
    p = await admin.get("pods", "rs", "default")
    assert p["status"]["containerStatuses"][0]["resources"]["limits"]["cpu"] == "100m"
    assert p["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "100m"

    await admin.delete("pods", "hog", "default", grace=0)

    def done(p: Json) -> bool:
        cs = p["status"]["containerStatuses"][0]
        return (cs["resources"]["limits"]["cpu"] == f"{want}m" and not
                {"PodResizePending", "PodResizeInProgress"} & set(conditions(p)))

    await settle(agent, admin, "rs", done, lambda _p: kernel.quota() == want * 100, "the deferred resize done")
    events = {e["reason"]: e["message"] for e in (await admin.list("events", "default"))["items"]
              if e["involvedObject"]["name"] == "rs"}
    assert events["ResizeDeferred"].startswith("Pod resize OutOfcpu: {")

    # a pod-level resize cannot be actuated on this node: Infeasible, nothing changes
    plr = pod("plr", agent.node, {"name": "app", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                  "command": SLEEPER})
    plr["spec"]["resources"] = {"requests": {"cpu": "100m", "memory": "32Mi"},
                                "limits": {"cpu": "200m", "memory": "64Mi"}}
    await admin.create(plr)
    await running_pod(agent, admin, "plr")
    code, out, err = await kubectl(ctl.kubeconfig, ctl.cache, "patch", "pod", "plr", "--subresource", "resize",
                                   "-p", json.dumps({"spec": {"resources": {"limits": {"cpu": "300m"}}}}))
    assert code == 0, (out, err)

    async def infeasible() -> Json | None:
        c = conditions(await admin.get("pods", "plr", "default")).get("PodResizePending")
        return c if c is not None and c.get("reason") == "Infeasible" else None

    c = await agent.wait_for("PodResizePending Infeasible", infeasible, timeout=30)
    assert c["message"] == "In-place pod-level resources resize is not supported on this node"
    assert c["observedGeneration"] == 2


async def test_restart_container_policy_restarts_only_that_container(joined: ResizeNode, runtime_view: RuntimeView) -> None:
    agent, admin, ctl = joined.agent, joined.admin, joined.ctl
    restart_memory = [{"resourceName": "memory", "restartPolicy": "RestartContainer"},
                      {"resourceName": "cpu", "restartPolicy": "NotRequired"}]
    await admin.create(pod("rc", agent.node,
                           container("app", {"cpu": "100m", "memory": "32Mi"}, {"cpu": "200m", "memory": "32Mi"},
                                     resizePolicy=restart_memory),
                           container("side", {"cpu": "100m", "memory": "32Mi"}, {"cpu": "200m", "memory": "32Mi"})))
    first = await running_pod(agent, admin, "rc")
    before = {s["name"]: s for s in first["status"]["containerStatuses"]}
    patch = json.dumps({"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "100m", "memory": "32Mi"},
                                      "limits": {"cpu": "200m", "memory": "64Mi"}}},
        {"name": "side", "resources": {"requests": {"cpu": "100m", "memory": "32Mi"},
                                       "limits": {"cpu": "200m", "memory": "64Mi"}}}]}})
    await ctl.resize("rc", patch)

    async def done() -> Json | None:
        p = await admin.get("pods", "rc", "default")
        after = {s["name"]: s for s in p["status"]["containerStatuses"]}
        ok = (all("running" in s["state"] and s["resources"]["limits"]["memory"] == "64Mi" for s in after.values())
              and "PodResizeInProgress" not in conditions(p))
        return after if ok else None

    after = await agent.wait_for("both containers at 64Mi", done, timeout=60)
    assert after["app"]["restartCount"] == 1 and after["app"]["containerID"] != before["app"]["containerID"]
    assert after["side"]["restartCount"] == 0 and after["side"]["containerID"] == before["side"]["containerID"]
    for name in ("app", "side"):
        assert (await kernel_of(runtime_view, after[name])).memory_limit() == 64 << 20
    events = [(e["reason"], e["message"]) for e in (await admin.list("events", "default"))["items"]
              if e["involvedObject"]["name"] == "rc" and e["reason"] == "Killing"]
    assert any("Container app resize requires restart" in m for _, m in events), events


async def test_memory_limit_below_usage_is_an_error(joined: ResizeNode, runtime_view: RuntimeView) -> None:
    agent, admin, ctl = joined.agent, joined.admin, joined.ctl
    hold = ["sh", "-c", "x=$(head -c 25000000 /dev/zero | tr '\\0' a); trap 'exit 0' TERM; "
                        "while true; do sleep 0.2; done"]
    await admin.create(pod("full", agent.node, {**container("app", {"cpu": "100m", "memory": "64Mi"},
                                                            {"cpu": "100m", "memory": "64Mi"}), "command": hold}))
    first = await running_pod(agent, admin, "full")
    kernel = await kernel_of(runtime_view, first["status"]["containerStatuses"][0])

    async def holding() -> int | None:  # well over 16Mi in use (CI once resized before the shell had it)
        usage = kernel.memory_usage()
        return usage if usage > 20 << 20 else None

    await agent.wait_for("the shell's 25 MB in use", holding, timeout=60)
    await ctl.resize("full", resize_patch("app", {"cpu": "100m", "memory": "16Mi"},
                                          {"cpu": "100m", "memory": "16Mi"}))

    async def error() -> Json | None:
        c = conditions(await admin.get("pods", "full", "default")).get("PodResizeInProgress")
        return c if c is not None and c.get("reason") == "Error" else None

    c = await agent.wait_for("PodResizeInProgress Error", error, timeout=30)
    # the pod's limit and the container's, each below what is in use (upstream's aggregate of both)
    assert re.fullmatch(rf"cannot decrease memory limits: \[attempting to set pod memory limit \({16 << 20}\) "
                        rf"below current usage \(\d+\), attempting to set container \"app\" memory limit "
                        rf"\({16 << 20}\) below current usage \(\d+\)\]", c["message"]), c["message"]
    assert c["observedGeneration"] == 2
    p = await admin.get("pods", "full", "default")
    cs = p["status"]["containerStatuses"][0]
    assert cs["resources"]["limits"]["memory"] == "64Mi" and cs["restartCount"] == 0
    assert cs["allocatedResources"]["memory"] == "16Mi"
    assert kernel.memory_limit() == 64 << 20


async def test_the_allocation_survives_an_agent_kill(joined: ResizeNode, runtime_view: RuntimeView) -> None:
    """kill -9 after a resize, a second resize while the agent is down: the restarted agent keeps the container
    and its allocation (read from `<rootDir>/allocated_pods_state`), then admits and actuates the new resize."""
    agent, admin, ctl = joined.agent, joined.admin, joined.ctl
    await admin.create(pod("rs", agent.node, container("app", {"cpu": "100m", "memory": "32Mi"},
                                                       {"cpu": "100m", "memory": "32Mi"})))
    first = await running_pod(agent, admin, "rs")
    status = first["status"]["containerStatuses"][0]
    kernel = await kernel_of(runtime_view, status)
    await ctl.resize("rs", resize_patch("app", {"cpu": "200m", "memory": "32Mi"}, {"cpu": "200m", "memory": "32Mi"}))
    await agent.wait_for("200m in force", lambda: _true(kernel.quota() == 20_000), timeout=30)
    checkpoint = json.loads((agent.root / "allocated_pods_state").read_text())
    allocated = json.loads(checkpoint["data"])[first["metadata"]["uid"]]["containers"]["app"]
    assert allocated["limits"] == {"cpu": "200m", "memory": "32Mi"}
    agent.kill9()
    await ctl.resize("rs", resize_patch("app", {"cpu": "200m", "memory": "64Mi"}, {"cpu": "200m", "memory": "64Mi"}))
    agent.start()

    def done(p: Json) -> bool:
        cs = p["status"]["containerStatuses"][0]
        return (cs.get("resources", {}).get("limits") == {"cpu": "200m", "memory": "64Mi"}
                and "PodResizeInProgress" not in conditions(p) and p["status"].get("observedGeneration") == 3)

    p = await settle(agent, admin, "rs", done,
                     lambda _p: kernel.memory_limit() == 64 << 20 and kernel.quota() == 20_000,
                     "the resize made while the agent was down")
    cs = p["status"]["containerStatuses"][0]
    assert (cs["containerID"], cs["restartCount"]) == (status["containerID"], 0)


async def _true(value: bool) -> bool:
    return value


async def test_a_sidecar_is_resized_in_place(joined: ResizeNode, runtime_view: RuntimeView) -> None:
    """A restartable init container is resized like a regular one (computeInitContainerActions)."""
    agent, admin, ctl = joined.agent, joined.admin, joined.ctl
    side = {**container("side", {"cpu": "100m", "memory": "32Mi"}, {"cpu": "100m", "memory": "32Mi"}),
            "restartPolicy": "Always"}
    await admin.create(pod("sc", agent.node, container("app", {"cpu": "100m", "memory": "32Mi"},
                                                       {"cpu": "100m", "memory": "32Mi"}), initContainers=[side]))
    first = await running_pod(agent, admin, "sc")
    before = first["status"]["initContainerStatuses"][0]
    kernel = await kernel_of(runtime_view, before)
    assert kernel.quota() == 10_000
    await ctl.resize("sc", json.dumps({"spec": {"initContainers": [
        {"name": "side", "resources": {"requests": {"cpu": "300m", "memory": "32Mi"},
                                       "limits": {"cpu": "300m", "memory": "32Mi"}}}]}}))

    def done(p: Json) -> bool:
        s = p["status"]["initContainerStatuses"][0]
        return s["resources"]["limits"]["cpu"] == "300m" and "PodResizeInProgress" not in conditions(p)

    p = await settle(agent, admin, "sc", done,
                     lambda _p: kernel.quota() == 30_000 and kernel.quota(pod_level=True) == 40_000,
                     "the sidecar at 300m")
    after = p["status"]["initContainerStatuses"][0]
    assert (after["containerID"], after["restartCount"]) == (before["containerID"], 0)
    assert after["allocatedResources"]["cpu"] == "300m"
