"""The harness's scheduler and workload controllers, one reconcile pass at a time, with a fake clock."""

from __future__ import annotations

from typing import Any

from tests.apiserver import ApiServer
from tests.apiserver.workloads import JOB_TRACKING_FINALIZER, Workloads, daemon_tolerations, fits, template_hash
from tests.unit.apiserver.world import World

Json = dict[str, Any]
TEMPLATE: Json = {"metadata": {"labels": {"app": "web"}},
                  "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1d"]}]}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def ready_node(api: ApiServer, world: World, name: str, *, ready: bool = True) -> None:
    await world.node(name)
    node = api.store.get("nodes", "", name)
    assert node is not None
    node["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                     "reason": "KubeletReady" if ready else "KubeletNotReady"}]
    api.store.update("nodes", node)


def pods(api: ApiServer, **labels: str) -> list[Json]:
    return [p for p in api.store.list_objects("pods", "default")
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())]


def set_phase(api: ApiServer, pod: Json, phase: str, ready: bool = False) -> None:
    fresh = api.store.get("pods", "default", pod["metadata"]["name"])
    assert fresh is not None
    fresh["status"]["phase"] = phase
    if ready:
        fresh["status"]["conditions"] = [*fresh["status"].get("conditions", []), {"type": "Ready", "status": "True"}]
    api.store.update("pods", fresh)


async def test_deployment_makes_a_replicaset_whose_pods_are_scheduled_and_scaled_down_gracefully(api: ApiServer) -> None:
    world = World(api)
    await ready_node(api, world, "n1")
    ctl = Workloads(api.store, api.registry)
    dep = await world.admin.create({"apiVersion": "apps/v1", "kind": "Deployment",
                                    "metadata": {"name": "web", "namespace": "default"},
                                    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                             "template": TEMPLATE}})
    assert dep["metadata"]["generation"] == 1
    ctl.reconcile()
    ctl.reconcile()
    phash = template_hash(dep["spec"]["template"])
    rs = api.store.get("replicasets", "default", f"web-{phash}")
    assert rs is not None and rs["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]
    made = pods(api, app="web")
    assert len(made) == 3
    for pod in made:
        md = pod["metadata"]
        assert md["generateName"] == f"web-{phash}-" and md["name"].startswith(f"web-{phash}-")
        assert md["labels"] == {"app": "web", "pod-template-hash": phash}
        assert md["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"web-{phash}",
                                          "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        # bound by the scheduler, defaulted by the API server as any created pod
        assert pod["spec"]["nodeName"] == "n1" and pod["spec"]["restartPolicy"] == "Always"
        assert [c["type"] for c in pod["status"]["conditions"]] == ["PodScheduled"]
    events = [e for e in api.store.list_objects("events", "default") if e["reason"] == "Scheduled"]
    assert len(events) == 3 and all(e["reportingComponent"] == "default-scheduler" for e in events)
    assert events[0]["message"].startswith("Successfully assigned default/web-")
    set_phase(api, made[0], "Running", ready=True)
    await world.admin.patch("deployments", "web", {"spec": {"replicas": 1}}, "default", strategic=False,
                            api_version="apps/v1")
    ctl.reconcile()
    ctl.reconcile()
    left = pods(api, app="web")
    deleting = [p for p in left if p["metadata"].get("deletionTimestamp")]
    assert len(left) == 3 and len(deleting) == 2  # graceful: they stay until their kubelet finishes them
    assert made[0]["metadata"]["name"] not in {p["metadata"]["name"] for p in deleting}  # the ready one stays
    assert all(p["metadata"]["deletionGracePeriodSeconds"] == 30 for p in deleting)
    dep_now = api.store.get("deployments", "default", "web")
    assert dep_now is not None and dep_now["metadata"]["generation"] == 2
    assert dep_now["status"]["observedGeneration"] == 2 and dep_now["status"]["readyReplicas"] == 1


async def test_job_counts_its_pods_backs_off_and_fails_past_its_backoff_limit(api: ApiServer) -> None:
    world = World(api)
    await ready_node(api, world, "n1")
    clock = Clock()
    ctl = Workloads(api.store, api.registry, clock=clock)
    job = await world.admin.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
                                    "spec": {"backoffLimit": 1, "template": {
                                        "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}}})
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    ctl.reconcile()
    (first,) = pods(api, **{"job-name": "j"})
    assert first["metadata"]["labels"] == {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "j",
                                           "controller-uid": uid, "job-name": "j"}
    assert first["metadata"]["finalizers"] == [JOB_TRACKING_FINALIZER]
    assert first["metadata"]["generateName"] == "j-" and first["spec"]["nodeName"] == "n1"
    set_phase(api, first, "Failed")
    ctl.reconcile()
    status = (api.store.get("jobs", "default", "j") or {})["status"]
    assert status["failed"] == 1 and "active" not in status
    assert (api.store.get("pods", "default", first["metadata"]["name"]) or {})["metadata"].get("finalizers") is None
    assert len(pods(api, **{"job-name": "j"})) == 1  # the 10 s back-off
    clock.now += 10
    ctl.reconcile()
    second = [p for p in pods(api, **{"job-name": "j"}) if p["metadata"]["name"] != first["metadata"]["name"]]
    assert len(second) == 1
    set_phase(api, second[0], "Failed")
    ctl.reconcile()
    status = (api.store.get("jobs", "default", "j") or {})["status"]
    assert status["failed"] == 2
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [
        ("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]
    clock.now += 100
    ctl.reconcile()
    assert len(pods(api, **{"job-name": "j"})) == 2  # no new pod after the job failed


async def test_job_completes_and_its_finished_pod_goes_once_released(api: ApiServer) -> None:
    world = World(api)
    await ready_node(api, world, "n1")
    ctl = Workloads(api.store, api.registry)
    await world.admin.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ok", "namespace": "default"},
                              "spec": {"template": {"spec": {**TEMPLATE["spec"], "restartPolicy": "OnFailure"}}}})
    ctl.reconcile()
    (pod,) = pods(api, **{"job-name": "ok"})
    # a graceful delete then the kubelet's final delete: the finalizer keeps the pod ...
    await world.admin.delete("pods", pod["metadata"]["name"], "default", grace=0)
    held = api.store.get("pods", "default", pod["metadata"]["name"])
    assert held is not None and held["metadata"]["deletionGracePeriodSeconds"] == 0
    set_phase(api, pod, "Succeeded")
    ctl.reconcile()
    # ... until the job controller has counted it
    assert api.store.get("pods", "default", pod["metadata"]["name"]) is None
    status = (api.store.get("jobs", "default", "ok") or {})["status"]
    assert status["succeeded"] == 1 and "completionTime" in status
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]


async def test_daemonset_pins_one_pod_per_node_and_only_ready_nodes_get_it_bound(api: ApiServer) -> None:
    world = World(api)
    await ready_node(api, world, "n1")
    await ready_node(api, world, "n2", ready=False)
    ctl = Workloads(api.store, api.registry)
    await world.admin.create({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
                              "spec": {"selector": {"matchLabels": {"app": "agent"}},
                                       "template": {**TEMPLATE, "metadata": {"labels": {"app": "agent"}}}}})
    ctl.reconcile()
    ctl.reconcile()
    made = pods(api, app="agent")
    assert len(made) == 2
    by_node = {p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
               ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]: p for p in made}
    assert set(by_node) == {"n1", "n2"}
    assert by_node["n1"]["spec"]["nodeName"] == "n1" and "nodeName" not in by_node["n2"]["spec"]
    tolerations = by_node["n1"]["spec"]["tolerations"]
    assert {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"} in tolerations
    assert not any(t.get("tolerationSeconds") for t in tolerations)  # DefaultTolerationSeconds adds nothing
    assert {"controller-revision-hash", "pod-template-generation"} <= set(by_node["n1"]["metadata"]["labels"])
    # the not-ready node's taint follows its Ready condition
    n2 = api.store.get("nodes", "", "n2")
    assert n2 is not None and {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in n2["spec"]["taints"]
    ds = api.store.get("daemonsets", "default", "agent")
    assert ds is not None and ds["status"]["desiredNumberScheduled"] == 2


def test_scheduler_filters() -> None:
    node: Json = {"metadata": {"name": "n1", "labels": {"disk": "ssd"}},
                  "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
                  "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    pod: Json = {"spec": {"containers": []}}
    assert not fits(pod, node)
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]
    assert fits(pod, node)
    pod["spec"]["nodeSelector"] = {"disk": "hdd"}
    assert not fits(pod, node)
    pod["spec"]["nodeSelector"] = {"disk": "ssd"}
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    assert not fits(pod, node)
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].append(
        {"matchExpressions": [{"key": "disk", "operator": "Exists"}]})
    assert fits(pod, node)
    node["spec"]["unschedulable"] = True
    assert not fits(pod, node)
    assert {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"} in \
        daemon_tolerations({"hostNetwork": True})


async def test_pressure_taints_follow_the_pressure_conditions(api: ApiServer) -> None:
    world = World(api)
    await ready_node(api, world, "n1")
    ctl = Workloads(api.store, api.registry)
    node = api.store.get("nodes", "", "n1")
    assert node is not None
    node["status"]["conditions"] += [{"type": "MemoryPressure", "status": "True"},
                                     {"type": "DiskPressure", "status": "False"}]
    api.store.update("nodes", node)
    ctl.reconcile()
    node = api.store.get("nodes", "", "n1")
    assert node is not None
    assert node["spec"]["taints"] == [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]
    for c in node["status"]["conditions"]:
        if c["type"] == "MemoryPressure":
            c["status"] = "False"
    api.store.update("nodes", node)
    ctl.reconcile()
    node = api.store.get("nodes", "", "n1")
    assert node is not None and "taints" not in node["spec"]
