"""The pod manager on the fake runtime: admission, static-pod replacement, orphans."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from cri.fake import Program
from cri.types import ContainerState
from minikubelet.base.podview import Pod
from minikubelet.node.labels import initial_node
from minikubelet.pod.predicate import PredicateAdmitHandler
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle
from tests.unit.fake_node import FakeNode, make_pod, running_node


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[FakeNode]:
    async with running_node(tmp_path, max_pods=2) as n:
        yield n


async def test_a_new_version_waits_until_the_old_one_has_stopped(node: FakeNode) -> None:
    node.runtime.program("app", Program(ignore_stop_signal=True))
    old = make_pod(uid="v1", terminationGracePeriodSeconds=5)
    node.config.set_source_pods("file", [old])
    await node.settle()
    assert node.phase("v1") == "Running"
    new = make_pod(uid="v2", terminationGracePeriodSeconds=5)
    node.config.set_source_pods("file", [new])
    await node.settle()
    assert node.phase("v2") == "Pending" and "v2" not in node.workers  # waiting, nothing started
    await node.advance(6)
    assert node.finished == ["v1"] and node.statuses.get_pod_status("v1") is None
    assert node.phase("v2") == "Running"
    assert [p["metadata"]["uid"] for p in node.statuses.pod_list()] == ["v2"]


async def test_max_pods_rejects_with_a_failed_status_and_an_event(node: FakeNode) -> None:
    pods: list[Pod] = [make_pod(name=f"p{i}", uid=f"u{i}") for i in range(3)]
    node.config.set_source_pods("file", pods)
    await node.settle()
    assert [node.phase(f"u{i}") for i in range(3)] == ["Running", "Running", "Failed"]
    rejected = node.statuses.get_pod_status("u2")
    assert rejected is not None and rejected["reason"] == "OutOfpods"
    # upstream rejectPod: the status message is prefixed, the event's is not; the QoS class is set
    message = "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    assert rejected["message"] == f"Pod was rejected: {message}" and rejected["qosClass"] == "BestEffort"
    assert ("OutOfpods", message) in node.events("u2")
    assert not [c for c in node.runtime.statuses() if c.labels.get("io.kubernetes.pod.uid") == "u2"]
    # an update does not re-admit a rejected pod; removing it forgets it
    node.config.set_source_pods("file", [*pods[:2], dict(pods[2], metadata={**pods[2]["metadata"], "labels": {"a": "b"}})])
    await node.settle()
    assert node.phase("u2") == "Failed" and "u2" not in node.workers
    node.config.set_source_pods("file", pods[:2])
    await node.settle()
    assert node.statuses.get_pod_status("u2") is None


async def test_a_terminating_pod_still_counts_against_max_pods(tmp_path: Path) -> None:
    """upstream filterOutInactivePods (GetActivePods, admission's canAdmitPod): a pod deleted gracefully holds
    its place while it runs out its grace; once its worker has terminated it (IsPodKnownTerminated) it no
    longer counts, though the API server has not removed it yet."""
    node = FakeNode(tmp_path, max_pods=1)
    try:
        node.runtime.program("app", Program(ignore_stop_signal=True))
        first = make_pod(name="first", uid="a1", terminationGracePeriodSeconds=30)
        node.config.set_source_pods("api", [first])
        await node.settle()
        assert node.phase("a1") == "Running"
        deleting = _deleted(first, 10)
        node.config.set_source_pods("api", [deleting])
        await node.settle()
        worker = node.workers.get("a1")
        assert worker is not None and worker.lifecycle is PodLifecycle.TERMINATING
        node.config.set_source_pods("api", [deleting, make_pod(name="second", uid="b1")])
        await node.settle()
        assert node.phase("b1") == "Failed" and "b1" not in node.workers
        assert node.statuses.get_pod_status("b1")["message"] == (  # type: ignore[index]
            "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1")
        await node.advance(11)  # SIGKILL at the end of the grace: terminated, still in the source
        terminated = node.workers.get("a1")
        assert terminated is not None and terminated.lifecycle is PodLifecycle.TERMINATED
        assert "a1" in node.manager.desired
        node.config.set_source_pods("api", [deleting, make_pod(name="third", uid="c1")])
        await node.settle()
        assert node.phase("c1") == "Running"
    finally:
        await node.close()


async def test_an_evicted_pod_counts_against_max_pods_until_it_has_stopped(tmp_path: Path) -> None:
    """upstream filterOutInactivePods: a pod already reported Failed (isAdmittedPodTerminal) still counts while
    its termination runs (IsPodTerminationRequested)."""
    node = FakeNode(tmp_path, max_pods=1)
    try:
        node.runtime.program("app", Program(ignore_stop_signal=True))
        evicted = make_pod(name="evicted", uid="e1", terminationGracePeriodSeconds=30)
        node.config.set_source_pods("api", [evicted])
        await node.settle()
        node.workers.update_pod(evicted, kill=KillPodOptions(
            grace_override=10, status_fn=lambda s: s.update(phase="Failed", reason="Evicted")))
        await node.settle()
        assert node.phase("e1") == "Failed" and "running" in node.container_state("app", "e1")["state"]
        node.config.set_source_pods("api", [evicted, make_pod(name="next", uid="n1")])
        await node.settle()
        assert node.phase("n1") == "Failed"
    finally:
        await node.close()


async def test_orphans_left_by_an_earlier_agent_are_stopped_and_removed(node: FakeNode, tmp_path: Path) -> None:
    node.config.set_source_pods("file", [make_pod(uid="gone", terminationGracePeriodSeconds=3)])
    await node.settle()
    await node.close()  # the agent stops; its pods keep running
    successor = FakeNode(tmp_path, runtime=node.runtime)  # a new agent on the same engine
    try:
        await successor.pleg.relist()
        successor.config.set_source_pods("file", [])  # the manifest was removed while it was down
        successor.manager.adopt_orphans(successor.pleg.runtime_uids)
        await successor.settle()
        assert node.runtime.statuses() == [] and successor.finished == ["gone"]
    finally:
        await successor.close()


async def test_completed_pods_do_not_count_against_max_pods(node: FakeNode) -> None:
    node.runtime.program("app", Program(exit_on_start=0))
    done = [make_pod(name=f"job{i}", uid=f"j{i}", restartPolicy="Never") for i in range(2)]
    node.config.set_source_pods("file", done)
    await node.settle()
    assert [node.phase(f"j{i}") for i in range(2)] == ["Succeeded", "Succeeded"]
    node.runtime.program("app", Program())
    node.config.set_source_pods("file", [*done, make_pod(name="web", uid="w")])
    await node.settle()
    assert node.phase("w") == "Running"


def _deleted(pod: Pod, grace: int) -> Pod:
    md = {**pod["metadata"], "deletionTimestamp": "2026-11-22T22:59:53Z", "deletionGracePeriodSeconds": grace}
    return {**pod, "metadata": md}


async def test_a_graceful_delete_kills_with_the_smaller_grace(node: FakeNode) -> None:
    node.runtime.program("app", Program(ignore_stop_signal=True))
    pod = make_pod(uid="u1", terminationGracePeriodSeconds=30)
    node.config.set_source_pods("api", [pod])
    await node.settle()
    assert node.phase("u1") == "Running"
    node.config.set_source_pods("api", [_deleted(pod, 4)])  # still in the source, being deleted
    await node.settle()
    worker = node.workers.get("u1")
    assert worker is not None and worker.terminating
    await node.advance(3)
    assert "running" in node.container_state("app", "u1")["state"]  # SIGTERM ignored: grace not over
    await node.advance(2)
    assert "terminated" in node.container_state("app", "u1")["state"] and worker.lifecycle is PodLifecycle.TERMINATED
    assert "u1" in node.workers  # the worker stays until the API server removes the pod


async def test_a_pod_deleted_before_it_started_is_never_admitted(node: FakeNode) -> None:
    node.config.set_source_pods("api", [_deleted(make_pod(uid="u9"), 30)])
    await node.settle()
    assert not [c for c in node.runtime.statuses() if c.labels.get("io.kubernetes.pod.uid") == "u9"
                and c.labels.get("io.kubernetes.container.name") == "app"]


async def test_an_orphan_is_killed_with_a_grace_of_one_second(node: FakeNode, tmp_path: Path) -> None:
    """Upstream HandlePodCleanups: a running pod no source knows (force-deleted while the agent was down) is
    killed with grace 1, so a container ignoring SIGTERM gets SIGKILL after the 2 s container minimum, not
    after the pod's own 30 s."""
    node.runtime.program("app", Program(ignore_stop_signal=True))
    node.config.set_source_pods("api", [make_pod(uid="forced", terminationGracePeriodSeconds=30)])
    await node.settle()
    await node.close()
    successor = FakeNode(tmp_path, runtime=node.runtime)
    try:
        await successor.pleg.relist()
        successor.config.set_source_pods("api", [])
        successor.manager.adopt_orphans(successor.pleg.runtime_uids)
        await successor.settle()
        assert [c for c in node.runtime.statuses() if c.state is ContainerState.RUNNING]
        await successor.advance(2)
        assert not [c for c in node.runtime.statuses() if c.state is ContainerState.RUNNING]
        assert successor.finished == ["forced"]
    finally:
        await successor.close()


def _with_phase(pod: Pod, phase: str, reason: str = "") -> Pod:
    return {**pod, "status": {"phase": phase, **({"reason": reason} if reason else {})}}


async def test_a_pod_the_api_shows_terminal_is_not_admitted_again(node: FakeNode) -> None:
    """After an agent restart the API pods come back with their status: a pod rejected earlier (Failed) or
    finished (Succeeded) gets no worker and no container, and its status is left as the API has it."""
    rejected = _with_phase(make_pod(name="r", uid="r1", nodeSelector={"pool": "none"}), "Failed", "NodeAffinity")
    done = _with_phase(make_pod(name="d", uid="d1", restartPolicy="Never"), "Succeeded")
    node.config.set_source_pods("api", [rejected, done])
    await node.settle()
    assert "r1" not in node.workers and "d1" not in node.workers
    assert node.runtime.statuses() == []
    assert node.statuses.get_pod_status("r1") is None and node.events("r1") == []
    node.config.set_source_pods("api", [])
    await node.settle()
    assert node.manager.desired == {}


async def test_a_terminal_api_pod_whose_containers_the_runtime_still_lists_is_no_orphan(
        node: FakeNode, tmp_path: Path) -> None:
    """After a node shutdown and boot the API pod is Failed and the engine still lists its exited containers: the
    next agent does not admit it and must not stop it as an orphan either, which would write a made-up status
    (no containers, Pending) over the terminal one (the VM lab's poweroff test found it)."""
    node.config.set_source_pods("api", [make_pod(uid="t1")])
    await node.settle()
    node.workers.update_pod(make_pod(uid="t1"), kill=KillPodOptions(
        grace_override=1, status_fn=lambda s: s.update(phase="Failed", reason="Terminated")))
    await node.advance(3)
    assert node.phase("t1") == "Failed" and node.runtime.statuses()
    await node.close()
    successor = FakeNode(tmp_path, runtime=node.runtime)
    try:
        await successor.pleg.relist()
        successor.config.set_source_pods("api", [_with_phase(make_pod(uid="t1"), "Failed", "Terminated")])
        await successor.settle()
        assert successor.manager.adopt_orphans(successor.pleg.runtime_uids) == 0
        await successor.settle()
        assert "t1" not in successor.workers and successor.statuses.get_pod_status("t1") is None
    finally:
        await successor.close()


async def test_a_node_affinity_refusal_waits_for_the_node_read_again(node: FakeNode) -> None:
    """Joined, a pod refused only for its node affinity is checked once more against the Node read again
    from the API server (a label added a moment ago may not have come through the watch yet)."""
    current = {"node": initial_node("node-1", {}, (), {"cpu": Fraction(2), "pods": Fraction(110)})}
    node.manager.admit_handlers.append(PredicateAdmitHandler(lambda: current["node"]))
    reads: list[str] = []
    node.manager.refetch_node = reads.append
    ssd = make_pod(name="ssd", uid="s1", nodeSelector={"disk": "ssd"})
    hdd = make_pod(name="hdd", uid="h1", nodeSelector={"disk": "hdd"})
    node.config.set_source_pods("api", [ssd, hdd])
    await node.settle()
    assert reads == ["s1", "h1"] and node.phase("s1") is None and node.phase("h1") is None
    assert "s1" not in node.workers and "h1" not in node.workers
    node.config.set_source_pods("api", [ssd, hdd])  # the same pods again: still one read each
    await node.settle()
    assert reads == ["s1", "h1"]
    current["node"] = initial_node("node-1", {"disk": "ssd"}, (), {"cpu": Fraction(2), "pods": Fraction(110)})
    node.manager.readmit("s1")
    node.manager.readmit("h1")
    await node.settle()
    assert node.phase("s1") == "Running"
    refused = node.statuses.get_pod_status("h1")
    assert refused is not None and refused["phase"] == "Failed" and refused["reason"] == "NodeAffinity"
    assert reads == ["s1", "h1"]  # no second read: the refusal stands


def _with_api_status(pod: Pod, status: dict[str, Any], rv: str) -> Pod:
    """The pod as the API server sends it back after a status write: a new status and resourceVersion."""
    return {**pod, "metadata": {**pod["metadata"], "resourceVersion": rv}, "status": status}


async def test_a_status_only_change_from_the_api_is_kept_without_a_sync(node: FakeNode) -> None:
    # upstream checkAndUpdatePod → HandlePodReconcile: our own status write coming back through the watch is
    # not an update of the pod; the worker keeps the new object for its next sync and brings none forward
    pod = make_pod(uid="u1")
    node.config.set_source_pods("api", [pod])
    await node.settle()
    assert node.phase("u1") == "Running"
    calls = len(node.runtime.calls)
    echoed = _with_api_status(pod, {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, "7")
    node.config.set_source_pods("api", [echoed])
    await node.settle()
    assert node.runtime.ops()[calls:] == []
    worker = node.workers.get("u1")
    assert worker is not None and worker.pod is echoed and node.manager.desired["u1"] is echoed
    # a label change is an update: the worker syncs
    relabelled = {**echoed, "metadata": {**echoed["metadata"], "labels": {"app": "x"}}}
    node.config.set_source_pods("api", [relabelled])
    await node.settle()
    assert len(node.runtime.calls) > calls and worker.pod is relabelled


async def test_a_status_change_of_a_pod_with_readiness_gates_syncs_it(node: FakeNode) -> None:
    # upstream NeedToReconcilePodReadiness: a controller's condition can change the pod's Ready condition
    pod = make_pod(uid="u1", readinessGates=[{"conditionType": "example.com/lb"}])
    node.config.set_source_pods("api", [pod])
    await node.settle()
    calls = len(node.runtime.calls)
    gate = {"type": "example.com/lb", "status": "True"}
    node.config.set_source_pods("api", [_with_api_status(pod, {"phase": "Running", "conditions": [gate]}, "8")])
    await node.settle()
    assert len(node.runtime.calls) > calls
    status = node.statuses.get_pod_status("u1") or {}
    ready = {c["type"]: c["status"] for c in status.get("conditions", [])}
    assert ready["example.com/lb"] == "True" and ready["Ready"] == "True"


async def test_housekeeping_kills_a_running_pod_no_worker_owns_but_not_on_a_listing_older_than_its_end(
        node: FakeNode, tmp_path: Path) -> None:
    """Upstream HandlePodCleanups on every pass: a running runtime pod no worker owns and no source wants is
    killed. A listing asked before a pod's worker finished still shows what that worker has just stopped."""
    node.config.set_source_pods("file", [make_pod(uid="done")])
    await node.settle()
    await node.pleg.relist()
    stale = (dict(node.pleg.runtime_uids), node.pleg.running_uids, node.pleg.listed_from)
    assert "done" in stale[1]
    node.config.set_source_pods("file", [])
    await node.settle()
    assert node.finished == ["done"]
    assert node.manager.kill_running_orphans(*stale) == 0 and "done" not in node.workers
    node.config.set_source_pods("file", [make_pod(uid="left")])
    await node.settle()
    await node.close()  # the agent stops; its pod keeps running
    successor = FakeNode(tmp_path, runtime=node.runtime)
    try:
        await successor.pleg.relist()
        successor.config.set_source_pods("file", [])
        pleg = successor.pleg
        assert successor.manager.kill_running_orphans(pleg.runtime_uids, pleg.running_uids, pleg.listed_from) == 1
        await successor.settle()
        await successor.advance(2)
        assert not [c for c in node.runtime.statuses() if c.state is ContainerState.RUNNING]
        assert successor.finished == ["left"]
    finally:
        await successor.close()


async def test_a_pod_refused_after_an_agent_restart_keeps_its_refusal_while_its_containers_stop(
        node: FakeNode, tmp_path: Path) -> None:
    """Admitted before a restart, refused after it (the other pods came first): what it runs is stopped by a
    stand-in worker, and its status stays the refusal throughout, never a status made up from the stand-in
    (Ready, no containers); once the pod is removed, so is its status."""
    node.runtime.program("app", Program(ignore_stop_signal=True))
    late = make_pod(name="late", uid="l1", terminationGracePeriodSeconds=30)
    node.config.set_source_pods("file", [late])
    await node.settle()
    assert node.phase("l1") == "Running"
    await node.close()
    successor = FakeNode(tmp_path, max_pods=1, runtime=node.runtime)
    try:
        await successor.pleg.relist()
        successor.config.set_source_pods("file", [make_pod(name="first", uid="f1"), late])
        assert successor.manager.adopt_orphans(successor.pleg.runtime_uids) == 1
        seen: list[dict[str, Any]] = []
        successor.statuses.add_listener(lambda pod, status: seen.append(dict(status or {}))
                                        if pod["metadata"]["uid"] == "l1" else None)
        for _ in range(4):  # ignores SIGTERM: SIGKILL after the orphan grace's 2 s minimum
            await successor.settle()
            refused = successor.statuses.get_pod_status("l1")
            assert refused is not None and refused["phase"] == "Failed" and refused["reason"] == "OutOfpods"
            await successor.advance(1)
        assert successor.finished == ["l1"]
        assert not [c for c in node.runtime.statuses()
                    if c.labels.get("io.kubernetes.pod.uid") == "l1" and c.state is ContainerState.RUNNING]
        assert seen == []  # nothing was written over the refusal
        assert successor.phase("l1") == "Failed"
        successor.config.set_source_pods("file", [make_pod(name="first", uid="f1")])
        await successor.settle()
        assert successor.statuses.get_pod_status("l1") is None
    finally:
        await successor.close()


def _admit_against_two_cpus(node: FakeNode) -> None:
    node.manager.admit_handlers.append(PredicateAdmitHandler(lambda: initial_node(
        "node-1", {}, (), {"cpu": Fraction(2), "memory": Fraction(4 << 30), "pods": Fraction(110)})))


def _api_pod(name: str, uid: str, cpu: str, grace: int) -> Pod:
    p = make_pod(name=name, uid=uid, containers=[{"name": "app", "image": "busybox", "resources": {
        "requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}], terminationGracePeriodSeconds=grace)
    p["metadata"]["annotations"]["kubernetes.io/config.source"] = "api"
    return p


async def test_a_critical_pod_runs_only_once_the_pod_it_preempts_has_stopped(tmp_path: Path) -> None:
    """upstream killPodNow: admission waits until the victim's worker has terminated it (here its grace, as it
    ignores SIGTERM); pods that come meanwhile are admitted after the critical pod, in order."""
    node = FakeNode(tmp_path)
    try:
        _admit_against_two_cpus(node)
        node.runtime.program("app", Program(ignore_stop_signal=True))
        victim = _api_pod("victim", "v1", "1500m", grace=5)
        node.config.set_source_pods("api", [victim])
        await node.settle()
        assert node.phase("v1") == "Running"
        critical = make_pod(name="critical", uid="c1", containers=[{"name": "app", "image": "busybox", "resources": {
            "requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}])
        node.config.set_source_pods("file", [critical])
        await node.settle()
        assert ("Preempting", "Preempted in order to admit critical pod") in node.events("v1")
        assert node.phase("v1") == "Failed" and "running" in node.container_state("app", "v1")["state"]
        assert "c1" not in node.workers and node.phase("c1") is None  # not admitted while the victim runs
        assert "c1" not in [p["metadata"]["uid"] for p in node.manager.active_pods()]
        later = _api_pod("later", "l1", "500m", grace=5)
        node.config.set_source_pods("api", [victim, later])
        await node.settle()
        assert "l1" not in node.workers and node.phase("l1") is None  # queued behind the preemption
        await node.advance(6)
        victim_worker = node.workers.get("v1")
        assert victim_worker is not None and victim_worker.lifecycle is PodLifecycle.TERMINATED
        assert node.phase("c1") == "Running" and node.phase("l1") == "Running"
        status = node.statuses.get_pod_status("v1")
        assert status is not None and status["reason"] == "Preempting"
    finally:
        await node.close()


async def test_a_preemption_whose_victim_outlasts_the_kill_timeout_admits_all_the_same(tmp_path: Path) -> None:
    """upstream: a victim not dead within 1.5 x its grace (at least 10 s) gets an ExceededGracePeriod event and
    the critical pod is admitted anyway."""
    node = FakeNode(tmp_path)
    try:
        _admit_against_two_cpus(node)
        victim = _api_pod("victim", "v1", "1500m", grace=2)
        node.config.set_source_pods("api", [victim])
        await node.settle()
        node.manager.preempt = lambda _pod: asyncio.Event()  # a kill that never completes
        node.config.set_source_pods("file", [make_pod(name="critical", uid="c1", containers=[{
            "name": "app", "image": "busybox", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}])])
        await node.settle()
        await node.advance(9)
        assert "c1" not in node.workers
        await node.advance(2)
        assert node.phase("c1") == "Running"
        assert ("ExceededGracePeriod", "Container runtime did not kill the pod within specified grace period.") in \
            node.events("v1")
    finally:
        await node.close()


async def test_a_victim_removed_while_its_preemption_waits_is_not_brought_back_to_be_killed(tmp_path: Path) -> None:
    """Simulator seed 127: a preemption's victim that waited behind an older pod of its name (no worker yet) and
    was removed from its source before its turn got a worker of its own for the kill, which then lived for ever.
    Its removal already took it out and nothing of it runs: there is nothing to kill."""
    node = FakeNode(tmp_path)
    try:
        _admit_against_two_cpus(node)
        node.runtime.program("app", Program(ignore_stop_signal=True))
        victim = _api_pod("victim", "v1", "1", grace=5)
        old = _api_pod("web", "w1", "1", grace=30)
        node.config.set_source_pods("api", [victim, old])
        await node.settle()
        assert node.phase("v1") == "Running" and node.phase("w1") == "Running"
        new = _api_pod("web", "w2", "1", grace=30)
        for r in new["spec"]["containers"][0]["resources"].values():
            r["memory"] = "64Mi"  # Guaranteed: preempted after v1 (Burstable)
        node.config.set_source_pods("api", [victim, new])  # w1 stops within its 30 s; w2 waits behind it
        await node.settle()
        assert "w2" not in node.workers
        node.config.set_source_pods("file", [make_pod(name="critical", uid="c1", containers=[{
            "name": "app", "image": "busybox", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}])])
        await node.settle()
        assert ("Preempting", "Preempted in order to admit critical pod") in node.events("v1")
        assert "w2" not in node.workers  # its turn comes once v1 has stopped
        node.config.set_source_pods("api", [victim])  # w2 removed meanwhile
        await node.settle()
        await node.advance(6)
        assert node.phase("c1") == "Running"
        assert "w2" not in node.workers and node.statuses.get_pod_status("w2") is None
    finally:
        await node.close()
