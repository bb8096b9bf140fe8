"""Issue 13's "Done means", workloads through the API: the real agent, joined to the test API server whose
scheduler and controllers (tests/apiserver/workloads.py) stand in for kube-scheduler and
kube-controller-manager, runs a Deployment (scaled up and down), Jobs that succeed and fail, a DaemonSet;
its pod status has the shape a real 1.36 kubelet writes (init containers, a sidecar, crash back-off,
readiness gates); graceful delete, eviction, events, a 410 and an API server restart behave as upstream."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from cri.errors import RuntimeError_
from tests import fixtures
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError, Client
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent, running_api, stop_and_clean
from tests.integration.runtime_view import POD_UID_LABEL, RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration
Json = dict[str, Any]
NS = "default"


def container(name: str, script: str, **extra: Any) -> Json:
    return {"name": name, "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", script], **extra}


def pod_spec(*containers: Json, **extra: Any) -> Json:
    return {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 2,
            "containers": list(containers), **extra}


def deployment(name: str, replicas: int) -> Json:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": pod_spec(container("main", "exec sleep 100000"))}}}


def job(name: str, exit_code: int, backoff_limit: int = 0) -> Json:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"backoffLimit": backoff_limit, "template": {"spec": pod_spec(
                container("main", f"echo bye; exit {exit_code}"), restartPolicy="Never")}}}


def condition(obj: Json, kind: str) -> Json:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def running_ready(pod: Json) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and condition(pod, "Ready").get("status") == "True"


async def labelled(admin: Client, selector: str) -> list[Json]:
    items: list[Json] = (await admin.list("pods", NS, query=f"labelSelector={selector}"))["items"]
    return items


async def exists(admin: Client, name: str) -> bool:
    try:
        await admin.get("pods", name, NS)
    except ApiStatusError:
        return False
    return True


async def container_gone(view: RuntimeView, cid: str) -> bool:
    return not await view.exists(cid)


def cid(status: Json) -> str:
    return str(status["containerID"])


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with running_api(tmp_path / "api", history=500, max_watch_seconds=10, workloads=True) as server:
        yield server


@pytest.fixture
async def joined(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker,
                 runtime_view: RuntimeView) -> AsyncIterator[JoinedAgent]:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.extra = {"nodeStatusUpdateFrequency": "2s"}
    agent.start()
    admin = api.admin()

    async def ready_node() -> bool:
        try:
            node = await admin.get("nodes", agent.node)
        except ApiStatusError:
            return False
        return condition(node, "Ready").get("status") == "True" and not (node.get("spec") or {}).get("taints")

    try:
        await agent.wait_for("the Node Ready and untainted", ready_node, timeout=60)
        yield agent
    finally:
        agent.stop()
        # API pods outlive the agent as static pods do; stop_and_clean only knows the static ones
        uids = {p["metadata"]["uid"] for p in api.store.list_objects("pods")}
        for uid in uids:
            for c in await runtime_view.containers_of(uid):
                with contextlib.suppress(RuntimeError_):
                    await runtime_view.runtime.remove_container(c.id)
            for sandbox in await runtime_view.runtime.list_pod_sandboxes({POD_UID_LABEL: uid}):
                with contextlib.suppress(RuntimeError_):
                    await runtime_view.runtime.remove_pod_sandbox(sandbox.id)
        await stop_and_clean(agent, docker)


async def wait_pods(agent: JoinedAgent, what: str, list_pods: Callable[[], Awaitable[list[Json]]],
                    check: Callable[[list[Json]], bool], timeout: float = 60) -> list[Json]:
    async def probe() -> list[Json] | None:
        pods = await list_pods()
        return pods if check(pods) else None

    found: list[Json] = await agent.wait_for(what, probe, timeout=timeout)
    return found


async def test_deployment_scales_up_and_down_on_the_node(api: ApiServer, joined: JoinedAgent,
                                                         runtime_view: RuntimeView) -> None:
    admin = api.admin()
    created = time.monotonic()
    await admin.create(deployment("web", 3))

    def web() -> Awaitable[list[Json]]:
        return labelled(admin, "app=web")

    pods = await wait_pods(joined, "3 web pods Running and Ready", web,
                           lambda ps: len(ps) == 3 and all(running_ready(p) for p in ps))
    print(f"measured: Deployment of 3 created -> 3 pods Running and Ready in the API: {time.monotonic() - created:.1f}s")
    for pod in pods:
        assert pod["spec"]["nodeName"] == joined.node and "pod-template-hash" in pod["metadata"]["labels"]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert await runtime_view.running(cid(pod["status"]["containerStatuses"][0]))
    await admin.patch("deployments", "web", {"spec": {"replicas": 5}}, NS, strategic=False, api_version="apps/v1")
    pods = await wait_pods(joined, "5 web pods Running and Ready", web,
                           lambda ps: len(ps) == 5 and all(running_ready(p) for p in ps))
    ids = {p["metadata"]["name"]: cid(p["status"]["containerStatuses"][0]) for p in pods}
    await admin.patch("deployments", "web", {"spec": {"replicas": 1}}, NS, strategic=False, api_version="apps/v1")
    (kept,) = await wait_pods(joined, "the web pods scaled down to 1", web, lambda ps: len(ps) == 1, timeout=60)
    assert running_ready(kept) and kept["metadata"]["name"] in ids
    for name, container_id in ids.items():
        if name != kept["metadata"]["name"]:
            await joined.wait_for(f"{name}'s container removed", _removed(runtime_view, container_id), timeout=20)
    # each scaled-down pod went through the graceful delete and the kubelet's final DELETE
    finals = [p for u, m, p in api.handler.requests if u == f"system:node:{joined.node}" and m == "DELETE"]
    assert len(finals) == 4
    dep = await admin.get("deployments", "web", NS, "apps/v1")
    assert dep["status"]["observedGeneration"] == 3
    # kubectl drain: the evicted pod goes, the ReplicaSet's replacement runs
    await admin.evict(kept["metadata"]["name"], NS)
    (fresh,) = await wait_pods(joined, "the replacement Running", web,
                               lambda ps: len(ps) == 1 and ps[0]["metadata"]["name"] != kept["metadata"]["name"]
                               and running_ready(ps[0]), timeout=60)
    assert fresh["metadata"]["ownerReferences"] == kept["metadata"]["ownerReferences"]


async def test_jobs_succeed_and_fail_with_their_exit_codes(api: ApiServer, joined: JoinedAgent) -> None:
    admin = api.admin()
    await admin.create(job("good", 0))
    await admin.create(job("bad", 3))
    await admin.create(job("retried", 4, backoff_limit=1))

    async def finished(name: str) -> Json | None:
        found = await admin.get("jobs", name, NS, "batch/v1")
        return found if condition(found, "Complete") or condition(found, "Failed") else None

    good = await joined.wait_for("job good finished", lambda: finished("good"), timeout=60)
    bad = await joined.wait_for("job bad finished", lambda: finished("bad"), timeout=60)
    assert condition(good, "Complete")["status"] == "True" and good["status"]["succeeded"] == 1
    assert condition(bad, "Failed")["reason"] == "BackoffLimitExceeded" and bad["status"]["failed"] == 1
    (ok,) = await labelled(admin, "job-name=good")
    (ko,) = await labelled(admin, "job-name=bad")
    assert ok["status"]["phase"] == "Succeeded" and ko["status"]["phase"] == "Failed"
    done = ok["status"]["containerStatuses"][0]["state"]["terminated"]
    failed = ko["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (done["exitCode"], done["reason"]) == (0, "Completed")
    assert (failed["exitCode"], failed["reason"]) == (3, "Error")
    # a terminal pod: not ready, and the job controller has released it
    assert condition(ko, "Ready")["status"] == "False" and "finalizers" not in ko["metadata"]
    assert ko["status"]["containerStatuses"][0]["ready"] is False
    # backoffLimit 1: a second pod after the 10 s back-off, then Failed
    retried = await joined.wait_for("job retried finished", lambda: finished("retried"), timeout=60)
    assert condition(retried, "Failed")["reason"] == "BackoffLimitExceeded" and retried["status"]["failed"] == 2
    first, second = sorted(await labelled(admin, "job-name=retried"), key=lambda p: p["metadata"]["creationTimestamp"])
    assert [p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in (first, second)] == [4, 4]
    finished_at = first["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    gap = _seconds(second["metadata"]["creationTimestamp"]) - _seconds(finished_at)
    assert gap >= 9, f"the second pod came {gap}s after the first failed"


async def test_sidecar_job_completes_and_its_sidecar_is_stopped(api: ApiServer, joined: JoinedAgent) -> None:
    """A Job whose pod has a restartable init container: done when the main container is, the sidecar then
    stopped by the kubelet, the pod Succeeded whatever the sidecar's exit (KEP-753)."""
    admin = api.admin()
    spec = pod_spec(container("main", "sleep 1; exit 0"), restartPolicy="Never", initContainers=[
        container("proxy", "trap 'exit 0' TERM; while true; do sleep 1; done", restartPolicy="Always")])
    await admin.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "withsidecar", "namespace": NS},
                        "spec": {"backoffLimit": 0, "template": {"spec": spec}}})

    async def complete() -> Json | None:
        found = await admin.get("jobs", "withsidecar", NS, "batch/v1")
        return found if condition(found, "Complete") else None

    await joined.wait_for("the sidecar job Complete", complete, timeout=60)
    (pod,) = await labelled(admin, "job-name=withsidecar")
    status = pod["status"]
    assert status["phase"] == "Succeeded"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    proxy = status["initContainerStatuses"][0]
    assert "terminated" in proxy["state"] and proxy["ready"] is False and proxy["started"] is False
    assert [(c["type"], c["status"], c.get("reason")) for c in status["conditions"]
            if c["type"] in ("Initialized", "Ready")] == [("Initialized", "True", "PodCompleted"),
                                                        ("Ready", "False", "PodCompleted")]


async def test_daemonset_pod_is_bound_by_the_scheduler_and_runs(api: ApiServer, joined: JoinedAgent) -> None:
    admin = api.admin()
    await admin.create({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": NS},
                        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                                 "template": {"metadata": {"labels": {"app": "agent"}},
                                              "spec": pod_spec(container("main", "exec sleep 100000"))}}})

    def daemon() -> Awaitable[list[Json]]:
        return labelled(admin, "app=agent")

    (pod,) = await wait_pods(joined, "the daemon pod Running", daemon,
                             lambda ps: len(ps) == 1 and running_ready(ps[0]))
    assert pod["spec"]["nodeName"] == joined.node
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [joined.node]}]}]
    events = (await admin.list("events", NS))["items"]
    mine = {e["reason"]: e for e in events if e["involvedObject"]["name"] == pod["metadata"]["name"]}
    # what `kubectl describe pod` lists: the scheduler's Scheduled, then the kubelet's own
    assert mine["Scheduled"]["reportingComponent"] == "default-scheduler"
    for reason in ("Pulled", "Created", "Started"):
        assert mine[reason]["source"] == {"component": "kubelet", "host": joined.node}, mine.get(reason)
        assert mine[reason]["involvedObject"]["fieldPath"] == "spec.containers{main}"
        assert mine[reason]["involvedObject"]["uid"] == pod["metadata"]["uid"]
    # upstream adds " and can be accessed by the pod" when KubeletEnsureSecretPulledImages is on
    assert mine["Pulled"]["message"].startswith(f'Container image "{BUSYBOX_IMAGE}" already present on machine')


def real_kubelet_status(fixture: str) -> Json:
    status: Json = fixtures.load(fixture)["response"]["body"]["status"]
    return status


def shape(status: Json) -> Json:
    """What must match a real kubelet's status, whatever the values: the fields present, the conditions'
    types (in order) and fields, and each container status's fields and state. (Key order is not
    compared: the test API server keeps Python's order, not Go's struct order.)"""
    def one(c: Json) -> Json:
        return {"keys": sorted(c), "state": list(c["state"]), "lastState": list(c["lastState"])}

    return {"keys": sorted(status),
            "conditions": [(c["type"], sorted(c)) for c in status["conditions"]],
            "init": {c["name"]: one(c) for c in status.get("initContainerStatuses", [])},
            "containers": {c["name"]: one(c) for c in status["containerStatuses"]}}


async def test_init_containers_sidecar_and_crash_backoff_show_as_a_real_kubelet_shows_them(
        api: ApiServer, joined: JoinedAgent, runtime_view: RuntimeView) -> None:
    """The pod of pod-real-kubelet-crashloopbackoff.json, reduced to what runs here (no probes over
    gRPC, no ConfigMap/Secret volumes): the same containers, resources and restart policies."""
    admin = api.admin()
    work = [{"name": "work", "mountPath": "/data"}]
    await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rich", "namespace": NS}, "spec": pod_spec(
        container("main", "exit 1", volumeMounts=work,
                  resources={"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}),
        initContainers=[
            container("init-setup", "echo initialized > /data/init.txt", volumeMounts=work,
                      resources={"requests": {"cpu": "10m", "memory": "8Mi"}}),
            container("sidecar-logger", "while true; do date >> /data/sidecar.log; sleep 5; done", volumeMounts=work,
                      restartPolicy="Always")],
        volumes=[{"name": "work", "emptyDir": {}}])})

    async def backing_off() -> Json | None:
        pod = await admin.get("pods", "rich", NS)
        main = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
        waiting = (main.get("state") or {}).get("waiting") or {}
        return pod if waiting.get("reason") == "CrashLoopBackOff" and main.get("lastState") else None

    pod = await joined.wait_for("main in CrashLoopBackOff", backing_off, timeout=60)
    status = pod["status"]
    real = real_kubelet_status("pod-real-kubelet-crashloopbackoff.json")
    ours, theirs = shape(status), shape(real)
    for part in theirs:
        assert ours[part] == theirs[part], f"{part}: ours {ours[part]} != real {theirs[part]}"
    assert status["observedGeneration"] == pod["metadata"]["generation"] == 1
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    assert [(c["type"], c["status"], c.get("reason")) for c in status["conditions"]] == [
        (c["type"], c["status"], c.get("reason")) for c in real["conditions"]]
    assert condition(pod, "Ready")["message"] == "containers with unready status: [main]"
    init, sidecar = status["initContainerStatuses"]
    main = status["containerStatuses"][0]
    assert init["state"]["terminated"]["exitCode"] == 0 and init["state"]["terminated"]["reason"] == "Completed"
    assert (init["ready"], init["started"], sidecar["ready"], sidecar["started"]) == (True, False, True, True)
    assert main["restartCount"] >= 1 and (main["ready"], main["started"]) == (False, False)
    last = main["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (1, "Error") and last["containerID"] == main["containerID"]
    uid = pod["metadata"]["uid"]
    assert main["state"]["waiting"]["message"] in {
        f"back-off {s}s restarting failed container=main pod=rich_default({uid})" for s in (10, 20, 40)}
    image = await runtime_view.runtime.image_status(BUSYBOX_IMAGE)
    assert image is not None
    for c in (init, sidecar, main):
        prefix = runtime_view.prefix
        assert c["containerID"].startswith(prefix) and len(c["containerID"]) == len(prefix) + 64
        if runtime_view.name == "docker":
            assert c["imageID"].startswith(("docker://sha256:", "docker-pullable://")), c["imageID"]
        else:  # containerd: the config digest, or the repo digest reference
            assert c["imageID"] == image.id or "@sha256:" in c["imageID"], c["imageID"]
        # the runtime's reference: the image's first repo tag, as cri-dockerd (and containerd) report it
        assert c["image"] in image.repo_tags
    assert main["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"} and main["resources"] == {
        "limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
    node = await admin.get("nodes", joined.node)
    internal = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    assert status["hostIP"] == internal and status["hostIPs"] == [{"ip": internal}]
    assert status["podIPs"] == [{"ip": status["podIP"]}] and status["qosClass"] == "Burstable"
    assert status["startTime"] <= init["state"]["terminated"]["startedAt"]

    async def backoff_event() -> Json | None:
        return next((e for e in (await admin.list("events", NS))["items"]
                     if e["involvedObject"]["name"] == "rich" and e["reason"] == "BackOff"), None)

    event = await joined.wait_for("the BackOff event", backoff_event, timeout=15)
    assert event["type"] == "Warning" and event["involvedObject"]["fieldPath"] == "spec.containers{main}"
    assert event["message"] == f"Back-off restarting failed container main in pod rich_default({uid})"


async def test_readiness_gate_holds_ready_until_its_condition_is_set(api: ApiServer, joined: JoinedAgent) -> None:
    admin = api.admin()
    gate = "example.com/load-balancer"
    await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gated", "namespace": NS},
                        "spec": pod_spec(container("main", "exec sleep 100000"),
                                         readinessGates=[{"conditionType": gate}])})

    async def containers_ready() -> Json | None:
        pod = await admin.get("pods", "gated", NS)
        return pod if condition(pod, "ContainersReady").get("status") == "True" else None

    pod = await joined.wait_for("the containers ready", containers_ready, timeout=60)
    ready = condition(pod, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")
    assert ready["message"] == f'corresponding condition of pod readiness gate "{gate}" does not exist.'
    # the controller owning the gate sets its condition; the kubelet keeps it and turns Ready
    await admin.patch("pods", "gated", {"status": {"conditions": [
        {"type": gate, "status": "True", "lastProbeTime": None, "lastTransitionTime": pod["status"]["startTime"]}]}},
        NS, sub="status")

    async def ready_now() -> Json | None:
        pod = await admin.get("pods", "gated", NS)
        return pod if condition(pod, "Ready").get("status") == "True" else None

    pod = await joined.wait_for("Ready once the gate is True", ready_now, timeout=30)
    assert condition(pod, gate)["status"] == "True"


async def test_delete_evict_410_and_api_restart(api: ApiServer, joined: JoinedAgent,
                                                runtime_view: RuntimeView) -> None:
    admin = api.admin()
    await admin.create(deployment("keep", 2))
    for name, script, grace in (("stubborn", "trap '' TERM; while true; do sleep 1; done", 30),
                                ("evictme", "exec sleep 100000", 2)):
        await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
                            "spec": pod_spec(container("main", script), terminationGracePeriodSeconds=grace)})

    async def all_running() -> list[Json] | None:
        pods: list[Json] = (await admin.list("pods", NS))["items"]
        return pods if len(pods) == 4 and all(running_ready(p) for p in pods) else None

    pods = await joined.wait_for("4 pods Running", all_running, timeout=60)
    by_name = {p["metadata"]["name"]: p for p in pods}

    # kubectl delete --grace-period=4 of a pod that ignores SIGTERM
    stubborn = cid(by_name["stubborn"]["status"]["containerStatuses"][0])
    started = time.monotonic()
    await admin.delete("pods", "stubborn", NS, grace=4)
    await joined.wait_for("stubborn deleted", lambda: _gone(admin, "stubborn"), timeout=30)
    took = time.monotonic() - started
    assert 3.5 <= took <= 9, f"graceful delete with grace 4 s took {took:.1f}s"
    print(f"measured: DELETE grace 4 of a SIGTERM-ignoring pod -> gone from the API: {took:.1f}s")
    await joined.wait_for("stubborn's container removed", lambda: container_gone(runtime_view, stubborn), timeout=15)

    # the Eviction API, as kubectl drain uses it
    evicted = cid(by_name["evictme"]["status"]["containerStatuses"][0])
    await admin.evict("evictme", NS)
    await joined.wait_for("evictme deleted", lambda: _gone(admin, "evictme"), timeout=30)
    await joined.wait_for("evictme's container removed", lambda: container_gone(runtime_view, evicted), timeout=15)
    killing = [e for e in (await admin.list("events", NS))["items"]
               if e["involvedObject"]["name"] == "evictme" and e["reason"] == "Killing"]
    assert killing and killing[0]["message"] == "Stopping container main"

    # the deployment's pods, which must live through what follows without a restart
    keep = {p["metadata"]["name"]: cid(p["status"]["containerStatuses"][0])
            for p in (await labelled(admin, "app=keep"))}
    # a watch expiry: history compacted, the agent's next watch from its resourceVersion gets 410
    watches = sum(1 for u, m, p in api.handler.requests if u == f"system:node:{joined.node}" and "watch=" in p)
    api.store.compact()
    await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "after410", "namespace": NS},
                        "spec": pod_spec(container("main", "exec sleep 100000"), nodeName=joined.node)})
    await joined.wait_for("after410 Running", lambda: _running(admin, "after410"), timeout=40)
    relists = [p for u, m, p in api.handler.requests[watches:]
               if u == f"system:node:{joined.node}" and "/pods?" in p and "watch=" not in p]
    assert relists, "the agent relists its pods after the 410"
    # an API server restart: stopped for 3 s, then the same storage served again
    await api.stop()
    await asyncio.sleep(3)
    await api.start()
    await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "afterrestart", "namespace": NS},
                        "spec": pod_spec(container("main", "exec sleep 100000"))})
    await joined.wait_for("afterrestart Running", lambda: _running(admin, "afterrestart"), timeout=60)
    await admin.delete("pods", "after410", NS, grace=1)
    await joined.wait_for("after410 deleted", lambda: _gone(admin, "after410"), timeout=30)
    # nothing restarted: the same containers, restartCount 0, still running
    for name, container_id in keep.items():
        pod = await admin.get("pods", name, NS)
        main = pod["status"]["containerStatuses"][0]
        assert cid(main) == container_id and main["restartCount"] == 0 and running_ready(pod)
        assert await runtime_view.running(container_id)
    assert len(await labelled(admin, "app=keep")) == 2


def _seconds(rfc3339: str) -> float:
    return datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _removed(view: RuntimeView, container_id: str) -> Callable[[], Awaitable[bool]]:
    return lambda: container_gone(view, container_id)


async def _gone(admin: Client, name: str) -> bool:
    return not await exists(admin, name)


async def _running(admin: Client, name: str) -> bool:
    try:
        return running_ready(await admin.get("pods", name, NS))
    except ApiStatusError:
        return False
