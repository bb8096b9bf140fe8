"""The eviction manager driven with the fake clock and Summary documents as `/stats/summary` serves them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.eviction.manager import IMMEDIATE_GRACE, EvictionManager, Settings
from minikubelet.eviction.ranking import eviction_message, local_storage_violation, rank
from minikubelet.eviction.signals import observations
from minikubelet.eviction.thresholds import parse_thresholds
from minikubelet.metrics import Metrics
from minikubelet.worker.lifecycle import PodStatusFn

MI = 2**20
GI = 2**30


def mkpod(name: str, mem_request: str | None = None, priority: int | None = None, **spec: Any) -> Pod:
    resources: dict[str, Any] = {"requests": {"memory": mem_request}} if mem_request else {}
    p: Pod = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "generation": 1},
              "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}], **spec}}
    if priority is not None:
        p["spec"]["priority"] = priority
    return p


def pod_stats(name: str, working_set: int, **extra: Any) -> dict[str, Any]:
    return {"podRef": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "memory": {"time": "2026-01-01T00:00:00Z", "workingSetBytes": working_set},
            "containers": [{"name": "c", "memory": {"workingSetBytes": working_set}}], **extra}


def summary(mem_available: int, pods: list[dict[str, Any]], t: str = "2026-01-01T00:00:00Z",
            fs_available: int = 50 * GI) -> dict[str, Any]:
    return {"node": {"memory": {"time": t, "availableBytes": mem_available, "workingSetBytes": 8 * GI - mem_available,
                                "usageBytes": 8 * GI - mem_available},
                     "fs": {"time": t, "availableBytes": fs_available, "capacityBytes": 100 * GI,
                            "inodesFree": 900, "inodes": 1000},
                     "rlimit": {"time": t, "maxpid": 4194304, "curproc": 300}},
            "pods": pods}


def test_observations_follow_make_signal_observations() -> None:
    obs = observations(summary(1 * GI, []))
    assert obs["memory.available"].available == GI and obs["memory.available"].capacity == 8 * GI
    assert obs["nodefs.available"].capacity == 100 * GI and obs["nodefs.inodesFree"].available == 900
    assert obs["pid.available"].available == 4194304 - 300
    assert "imagefs.available" not in obs  # no runtime section, no observation


def test_memory_ranking_exceeds_requests_then_priority_then_usage_above_request() -> None:
    small_over = mkpod("small-over", "10Mi")
    big_within = mkpod("big-within", "1Gi")
    high_prio_over = mkpod("high-prio-over", "10Mi", priority=1000)
    huge_over = mkpod("huge-over", "10Mi")
    no_stats = mkpod("no-stats")
    stats = {p["metadata"]["uid"]: s for p, s in [
        (small_over, pod_stats("small-over", 50 * MI)), (big_within, pod_stats("big-within", 900 * MI)),
        (high_prio_over, pod_stats("high-prio-over", 800 * MI)), (huge_over, pod_stats("huge-over", 500 * MI))]}
    order = rank([big_within, small_over, high_prio_over, huge_over, no_stats],
                 lambda p: stats.get(p["metadata"]["uid"]), "memory")
    assert [p["metadata"]["name"] for p in order] == ["no-stats", "huge-over", "small-over", "high-prio-over",
                                                      "big-within"]


def test_eviction_message_is_upstreams() -> None:
    (t,) = parse_thresholds({"memory.available": "100Mi"})
    p = mkpod("hog", "64Mi")
    s = pod_stats("hog", 300 * MI)
    message, ann = eviction_message("memory", p, s, [t], observations(summary(80 * MI, [s])))
    assert message == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
                       "Container c was using 300Mi, request is 64Mi, has larger consumption of memory. ")
    assert ann == {"offending_containers": "c", "offending_containers_usage": "300Mi", "starved_resource": "memory"}
    message, _ = eviction_message("memory", mkpod("be"), pod_stats("be", 12345), [t],
                                  observations(summary(80 * MI + 7, [])))
    assert message.endswith("available: 83886087. Container c was using 12345, request is 0, has larger "
                            "consumption of memory. ")


def test_evictionMessage_pod_level_memory_request() -> None:
    """upstream evictionMessage: the pod line whenever the pod has a pod-level memory request (its usage is not
    compared), only for memory; a pod whose memory stats are missing gets none."""
    (t,) = parse_thresholds({"memory.available": "100Mi"})
    p = mkpod("web", "64Mi", resources={"requests": {"memory": "512Mi"}})
    s = pod_stats("web", 50 * MI)
    message, ann = eviction_message("memory", p, s, [t], observations(summary(80 * MI, [s])))
    assert message == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
                       "Pod web was using 50Mi, request is 512Mi, has larger consumption of memory. ")
    assert ann == {"offending_pod": "web", "offending_pod_usage": "50Mi", "offending_containers": "",
                   "offending_containers_usage": "", "starved_resource": "memory"}
    no_memory = {k: v for k, v in s.items() if k != "memory"}
    assert "Pod web" not in eviction_message("memory", p, no_memory, [t], observations(summary(80 * MI, [s])))[0]
    message, ann = eviction_message("ephemeral-storage", p, s, [], {})
    assert "Pod web" not in message and "offending_pod" not in ann


def test_local_storage_limits() -> None:
    p = mkpod("ed", volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}])
    assert local_storage_violation(p, {"volume": [{"name": "scratch", "usedBytes": MI}]}) is None
    assert local_storage_violation(p, {"volume": [{"name": "scratch", "usedBytes": MI + 4096}]}) == \
        'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
    lim = mkpod("lim")
    lim["spec"]["containers"][0]["resources"] = {"limits": {"ephemeral-storage": "2Mi"}}
    assert local_storage_violation(lim, {"ephemeral-storage": {"usedBytes": 3 * MI}, "containers": []}) == \
        "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "
    assert local_storage_violation(lim, {"containers": [{"name": "c", "logs": {"usedBytes": 3 * MI}}]}) == \
        'Container c exceeded its local ephemeral storage limit "2Mi". '


class Harness:
    def __init__(self, settings: Settings, pods: list[Pod]) -> None:
        self.clock = FakeClock()
        self.pods = pods
        self.doc: dict[str, Any] = summary(4 * GI, [])
        self.killed: list[tuple[str, int, dict[str, Any]]] = []
        self.events: list[tuple[str, str, str]] = []
        self.event_annotations: list[dict[str, str]] = []  # of the pod events, in order
        self.gone: set[str] = set()
        self.reclaimed = 0
        self.fresh: list[bool] = []
        self.metrics = Metrics()
        self.m = EvictionManager(settings, self.clock, self.summary, lambda: [
            p for p in self.pods if p["metadata"]["uid"] not in self.gone], self.kill,
            self.pod_event,
            lambda etype, reason, msg: self.events.append(("node", reason, msg)),
            lambda pod: pod["metadata"]["uid"] in self.gone, metrics=self.metrics)

    def pod_event(self, pod: Pod, etype: str, reason: str, msg: str, annotations: Mapping[str, str]) -> None:
        self.events.append((pod["metadata"]["name"], reason, msg))
        self.event_annotations.append(dict(annotations))

    async def summary(self, fresh: bool) -> dict[str, Any]:
        self.fresh.append(fresh)
        return self.doc

    def kill(self, pod: Pod, grace: int, fn: PodStatusFn) -> None:
        status: dict[str, Any] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        fn(status)
        self.killed.append((pod["metadata"]["name"], grace, status))
        self.gone.add(pod["metadata"]["uid"])


async def test_hard_threshold_evicts_one_pod_at_once_with_status_condition_and_event() -> None:
    hog, quiet = mkpod("hog"), mkpod("quiet", "100Mi")
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"})), [quiet, hog])
    h.doc = summary(50 * MI, [pod_stats("hog", 700 * MI), pod_stats("quiet", 10 * MI)])
    evicted = await h.m.synchronize()
    assert [p["metadata"]["name"] for p in evicted] == ["hog"]
    name, grace, status = h.killed[0]
    assert (name, grace) == ("hog", IMMEDIATE_GRACE)
    message = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
               "Container c was using 700Mi, request is 0, has larger consumption of memory. ")
    assert status["phase"] == "Failed" and status["reason"] == "Evicted" and status["message"] == message
    cond = status["conditions"][-1]
    assert cond == {"type": "DisruptionTarget", "observedGeneration": 1, "status": "True", "lastProbeTime": None,
                    "lastTransitionTime": cond["lastTransitionTime"], "reason": "TerminationByKubelet",
                    "message": message}
    assert ("node", "EvictionThresholdMet", "Attempting to reclaim memory") in h.events
    assert ("hog", "Evicted", message) in h.events
    assert h.event_annotations == [{"offending_containers": "c", "offending_containers_usage": "700Mi",
                                    "starved_resource": "memory"}]
    assert h.m.conditions == ["MemoryPressure"] and h.m.memory_pressure
    # kubelet_evictions by the threshold's signal, and the age of the stats it acted on
    reg = h.metrics.registry
    assert reg.get_sample_value("kubelet_evictions_total", {"eviction_signal": "memory.available"}) == 1
    assert reg.get_sample_value("kubelet_eviction_stats_age_seconds_count", {"eviction_signal": "memory.available"}) == 1


async def test_evictionMessage_with_pod_level_resources_names_the_pod_in_message_and_event() -> None:
    """upstream evictionMessage (PodLevelResources, on in 1.36): a pod with a pod-level memory request gets the
    `Pod <name> was using …, request is …` line before its containers', and the Evicted Event the
    offending_pod / offending_pod_usage annotations beside the containers'."""
    hog = mkpod("hog", resources={"requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi"}})
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"})), [hog])
    h.doc = summary(50 * MI, [pod_stats("hog", 700 * MI)])
    await h.m.synchronize()
    message = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
               "Pod hog was using 700Mi, request is 1Gi, has larger consumption of memory. "
               "Container c was using 700Mi, request is 0, has larger consumption of memory. ")
    assert h.killed[0][2]["message"] == message and ("hog", "Evicted", message) in h.events
    assert h.event_annotations == [{"offending_pod": "hog", "offending_pod_usage": "700Mi",
                                    "offending_containers": "c", "offending_containers_usage": "700Mi",
                                    "starved_resource": "memory"}]


async def test_soft_threshold_waits_for_its_grace_and_caps_the_pod_grace() -> None:
    p = mkpod("p", terminationGracePeriodSeconds=60)
    h = Harness(Settings(parse_thresholds({}, soft={"memory.available": "1Gi"},
                                          soft_grace={"memory.available": "30s"}), max_pod_grace_period=20), [p])
    h.doc = summary(512 * MI, [pod_stats("p", 100 * MI)])
    assert await h.m.synchronize() == []
    assert h.m.memory_pressure  # the condition is reported before the grace period is over
    h.clock.advance(29)
    h.doc = summary(512 * MI, [pod_stats("p", 100 * MI)], t="2026-01-01T00:00:29Z")
    assert await h.m.synchronize() == []
    h.clock.advance(1)
    h.doc = summary(512 * MI, [pod_stats("p", 100 * MI)], t="2026-01-01T00:00:30Z")
    assert len(await h.m.synchronize()) == 1
    assert h.killed[0][1] == 20


async def test_pressure_condition_stays_for_the_transition_period() -> None:
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"}), pressure_transition_period=300), [])
    h.doc = summary(50 * MI, [])
    await h.m.synchronize()
    assert h.m.conditions == ["MemoryPressure"]
    h.clock.advance(10)
    h.doc = summary(4 * GI, [], t="2026-01-01T00:00:10Z")
    await h.m.synchronize()
    assert h.m.conditions == ["MemoryPressure"]
    h.clock.advance(289)  # 299 s since it was last observed
    await h.m.synchronize()
    assert h.m.conditions == ["MemoryPressure"]
    h.clock.advance(1)
    await h.m.synchronize()
    assert h.m.conditions == []


async def test_node_level_reclaim_first_then_no_eviction_when_it_was_enough() -> None:
    p = mkpod("p")
    settings = Settings(parse_thresholds({"nodefs.available": "10%"}))
    h = Harness(settings, [p])

    async def reclaim() -> None:
        h.reclaimed += 1
        h.doc = summary(4 * GI, [pod_stats("p", MI)], fs_available=20 * GI)

    settings.reclaim = {"nodefs.available": [reclaim]}
    h.doc = summary(4 * GI, [pod_stats("p", MI)], fs_available=5 * GI)
    assert await h.m.synchronize() == []
    assert h.reclaimed == 1 and h.killed == []
    assert h.m.disk_pressure
    assert h.fresh == [False, True]  # the housekeeping pass's stats, then stats taken after the reclaim


async def test_critical_and_static_pods_are_never_evicted() -> None:
    static = mkpod("static")
    static["metadata"]["annotations"] = {"kubernetes.io/config.source": "file"}
    critical = mkpod("critical", priority=2_000_000_000)
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"})), [static, critical])
    h.doc = summary(50 * MI, [pod_stats("static", GI), pod_stats("critical", GI)])
    assert await h.m.synchronize() == []
    assert h.killed == []


async def test_admission_under_pressure() -> None:
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi", "nodefs.available": "10%"})), [])
    best_effort, burstable = mkpod("be"), mkpod("bu", "10Mi")
    tolerant = mkpod("tol", tolerations=[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
                                          "effect": "NoSchedule"}])
    assert h.m.admit(best_effort, []).admit
    h.doc = summary(50 * MI, [])
    await h.m.synchronize()
    refused = h.m.admit(best_effort, [])
    assert (refused.admit, refused.reason, refused.message) == (False, "Evicted",
                                                                "The node had condition: [MemoryPressure]. ")
    assert h.m.admit(burstable, []).admit and h.m.admit(tolerant, []).admit
    h.doc = summary(50 * MI, [], fs_available=GI)
    await h.m.synchronize()
    refused = h.m.admit(burstable, [])
    assert (refused.admit, refused.message) == (False, "The node had condition: [MemoryPressure DiskPressure]. ")
    static = mkpod("s")
    static["metadata"]["annotations"] = {"kubernetes.io/config.source": "file"}
    assert h.m.admit(static, []).admit


async def test_the_loop_waits_for_the_evicted_pod_then_keeps_the_interval() -> None:
    p1, p2 = mkpod("a"), mkpod("b")
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"})), [p1, p2])
    h.doc = summary(50 * MI, [pod_stats("a", 300 * MI), pod_stats("b", 200 * MI)])
    task = asyncio.create_task(h.m.run())
    for _ in range(5):
        await asyncio.sleep(0)
    assert [k[0] for k in h.killed] == ["a"]  # one pod per pass
    h.clock.advance(1)  # the pod is gone: the next pass follows the cleanup
    for _ in range(10):
        await asyncio.sleep(0)
    h.doc = summary(50 * MI, [pod_stats("b", 200 * MI)], t="2026-01-01T00:00:01Z")
    h.clock.advance(10)
    for _ in range(10):
        await asyncio.sleep(0)
    assert [k[0] for k in h.killed] == ["a", "b"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_notify_wakes_the_loop_before_the_interval() -> None:
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"})), [mkpod("a")])
    task = asyncio.create_task(h.m.run())
    for _ in range(5):
        await asyncio.sleep(0)
    assert h.killed == []
    h.doc = summary(50 * MI, [pod_stats("a", 300 * MI)], t="2026-01-01T00:00:01Z")
    h.m.notify("test")
    for _ in range(10):
        await asyncio.sleep(0)
    assert [k[0] for k in h.killed] == ["a"]
    assert h.fresh == [False, True]  # the notified pass asks for stats taken now
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_pid_ranking_is_priority_then_process_count() -> None:
    few, many, important = mkpod("few"), mkpod("many"), mkpod("important", priority=10)
    stats = {"uid-few": {"process_stats": {"process_count": 3}}, "uid-many": {"process_stats": {"process_count": 90}},
             "uid-important": {"process_stats": {"process_count": 500}}}
    order = rank([important, few, many], lambda p: stats.get(p["metadata"]["uid"]), "pids")
    assert [p["metadata"]["name"] for p in order] == ["many", "few", "important"]


def test_disk_ranking_counts_logs_and_local_volumes_against_ephemeral_storage_requests() -> None:
    a = mkpod("a", volumes=[{"name": "v", "emptyDir": {}}])
    b = mkpod("b")
    b["spec"]["containers"][0]["resources"] = {"requests": {"ephemeral-storage": "1Gi"}}
    stats: dict[str, dict[str, Any]] = {
        "uid-a": {"containers": [{"name": "c", "logs": {"usedBytes": MI}}], "volume": [{"name": "v", "usedBytes": 50 * MI}]},
        "uid-b": {"containers": [{"name": "c", "logs": {"usedBytes": 500 * MI}}]}}
    # b uses more, but within its request: a (over its zero request) goes first
    order = rank([b, a], lambda p: stats.get(p["metadata"]["uid"]), "ephemeral-storage")
    assert [p["metadata"]["name"] for p in order] == ["a", "b"]


async def test_stats_no_newer_than_the_last_pass_evict_nobody_else() -> None:
    a, b = mkpod("a"), mkpod("b")
    h = Harness(Settings(parse_thresholds({"memory.available": "100Mi"})), [a, b])
    h.doc = summary(50 * MI, [pod_stats("a", 300 * MI), pod_stats("b", 200 * MI)])
    assert len(await h.m.synchronize()) == 1
    # the housekeeping pass has not run since: the same stats must not cost a second pod
    assert await h.m.synchronize() == []
    assert [k[0] for k in h.killed] == ["a"]
    assert h.m.memory_pressure


def test_local_storage_evictions_are_labelled_with_the_kubelets_signals() -> None:
    from minikubelet.eviction.ranking import local_storage_signal

    p = mkpod("p", volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}])
    lim = mkpod("lim", containers=[{"name": "c", "image": "i", "resources": {"limits": {"ephemeral-storage": "2Mi"}}}])
    empty_dir = local_storage_violation(p, {"volume": [{"name": "scratch", "usedBytes": 2 * MI}]})
    pod_total = local_storage_violation(lim, {"ephemeral-storage": {"usedBytes": 3 * MI}, "containers": []})
    container = local_storage_violation(lim, {"containers": [{"name": "c", "logs": {"usedBytes": 3 * MI}}]})
    assert empty_dir and pod_total and container
    assert [local_storage_signal(m) for m in (empty_dir, pod_total, container)] == [
        "emptydirfs.limit", "ephemeralpodfs.limit", "ephemeralcontainerfs.limit"]
