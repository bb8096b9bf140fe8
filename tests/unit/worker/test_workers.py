"""Pod workers through whole lifecycles on the fake runtime and the fake clock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cri.errors import RuntimeError_
from cri.fake import Program
from cri.types import ExecResult
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import PodView
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle, terminal_status_fn
from minikubelet.worker.planner import KillContainer
from minikubelet.worker.sync import kill_grace_period
from tests.unit.fake_node import IMAGE, FakeNode, make_pod


async def test_a_pod_runs_and_reports_running(node: FakeNode) -> None:
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert node.phase() == "Running"
    app = node.container_state("app")
    assert "running" in app["state"] and app["restartCount"] == 0
    assert node.runtime.running() == [node.runtime.container_id("app")]
    assert [r for r, _ in node.events()] == ["Pulled", "Created", "Started"]


async def test_crash_loop_waits_out_the_backoff_on_the_clock(node: FakeNode) -> None:
    node.runtime.program("app", Program(exit_on_start=1))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    def starts() -> int:
        return sum(1 for c in node.runtime.calls if c.op == "start_container")

    # upstream: the first restart comes at once, then 10 s, 20 s, ...
    assert starts() == 2
    assert node.container_state("app")["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    await node.advance(9)
    assert starts() == 2
    await node.advance(2)
    assert starts() == 3
    await node.advance(19)
    assert starts() == 3
    await node.advance(2)
    assert starts() == 4
    assert node.container_state("app")["restartCount"] == 3


async def test_kill_with_a_status_function_terminates_with_that_status(node: FakeNode) -> None:
    node.config.set_source_pods("file", [make_pod(terminationGracePeriodSeconds=30)])
    await node.settle()
    w = node.workers.get("uid-1")
    assert w is not None
    node.workers.update_pod(w.pod, kill=KillPodOptions(
        grace_override=5, status_fn=terminal_status_fn("Failed", "Evicted", "The node was low on resource: memory.")))
    await node.settle()
    assert w.lifecycle is PodLifecycle.TERMINATED and not w.removed
    stops = [c.args for c in node.runtime.calls if c.op == "stop_container"]
    assert stops and stops[0][1] == 5  # the override's grace, not the spec's 30 s
    status = node.statuses.get_pod_status("uid-1")
    assert status is not None and (status["phase"], status["reason"]) == ("Failed", "Evicted")
    # the terminated pod stays terminated: a resync starts nothing
    await node.advance(30, step=5)
    assert node.runtime.running() == [] and node.phase() == "Failed"


async def test_removal_terminates_cleans_up_and_ends_the_worker(node: FakeNode, tmp_path: Path) -> None:
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert (tmp_path / "pods" / "uid-1").is_dir()
    node.config.set_source_pods("file", [])
    await node.settle()
    assert node.finished == ["uid-1"] and "uid-1" not in node.workers
    assert node.statuses.get_pod_status("uid-1") is None
    assert node.runtime.statuses() == [] and not (tmp_path / "pods" / "uid-1").exists()
    ops = node.runtime.ops()
    assert ops.index("stop_container") < ops.index("stop_pod_sandbox") < ops.index("remove_container")


async def test_sidecars_stop_after_regular_containers_in_reverse_order(node: FakeNode) -> None:
    sidecar = {"name": "proxy", "image": IMAGE, "restartPolicy": "Always"}
    logger = {"name": "logger", "image": IMAGE, "restartPolicy": "Always"}
    node.runtime.program("app", Program(ignore_stop_signal=True))  # takes its whole grace period
    node.config.set_source_pods("file", [make_pod(inits=[sidecar, logger], terminationGracePeriodSeconds=4)])
    await node.settle()
    assert node.phase() == "Running"
    names = {node.runtime.container_id(n): n for n in ("app", "proxy", "logger")}
    node.config.set_source_pods("file", [])
    await node.settle()
    def stop_calls() -> list[str]:
        return [names[c.args[0]] for c in node.runtime.calls if c.op == "stop_container"]

    assert stop_calls() == ["app"]  # the sidecars wait while the app takes its grace period
    await node.advance(3)
    assert stop_calls() == ["app"]
    await node.advance(3)
    assert stop_calls() == ["app", "logger", "proxy"]
    assert node.finished == ["uid-1"]


async def test_active_deadline_fails_the_pod_and_kills_it(node: FakeNode) -> None:
    node.config.set_source_pods("file", [make_pod(activeDeadlineSeconds=5, restartPolicy="Never")])
    await node.settle()
    assert node.phase() == "Running"
    await node.advance(6)
    status = node.statuses.get_pod_status("uid-1")
    assert status is not None and (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded")
    assert ("DeadlineExceeded", "Pod was active on the node longer than the specified deadline") in node.events()
    assert node.runtime.running() == []


async def test_a_runtime_error_is_retried_after_ten_to_fifteen_seconds(node: FakeNode) -> None:
    node.runtime.fail("run_pod_sandbox", RuntimeError_("docker is restarting"))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert node.runtime.running() == []
    assert any(r == "FailedCreatePodSandBox" for r, _ in node.events())
    await node.advance(9.5, step=0.5)
    assert node.runtime.running() == []
    await node.advance(6, step=0.5)
    assert node.phase() == "Running"


async def test_a_succeeded_pod_is_terminated_and_stays_so(node: FakeNode) -> None:
    node.runtime.program("app", Program(exit_on_start=0))
    node.config.set_source_pods("file", [make_pod(restartPolicy="OnFailure")])
    await node.settle()
    w = node.workers.get("uid-1")
    assert w is not None and w.lifecycle is PodLifecycle.TERMINATED
    assert node.phase() == "Succeeded"
    sandbox_stops = [c for c in node.runtime.calls if c.op == "stop_pod_sandbox"]
    assert sandbox_stops  # the sandbox of a finished pod is stopped
    await node.advance(25, step=5)
    assert sum(1 for c in node.runtime.calls if c.op == "start_container") == 1


async def test_backoff_counts_run_time_from_the_restart_not_the_previous_exit(node: FakeNode) -> None:
    """D8, upstream flowcontrol.Backoff.Next + the kubelet's HasExpiredFunc: `lastUpdate` is stamped at the
    restart, so a 350 s run after seven instant crashes (back-off at its 300 s cap) keeps the cap."""
    node.runtime.program("app", Program(exit_on_start=1))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    def starts() -> int:
        return sum(1 for c in node.runtime.calls if c.op == "start_container")


    async def until_starts(n: int) -> None:
        for _ in range(400):
            if starts() >= n:
                return
            await node.advance(2, step=2)

    await until_starts(7)  # seven instant crashes: gaps 0, 10, 20, 40, 80, 160
    assert starts() == 7
    node.runtime.program("app", Program())  # the eighth attempt, after 300 s, runs...
    await until_starts(8)
    assert starts() == 8
    await node.advance(350, step=5)  # ...for 350 s, then crashes again
    node.runtime.exit_container(node.runtime.container_id("app"), 1)
    node.runtime.program("app", Program(exit_on_start=1))
    await node.settle()
    assert starts() == 8
    await node.advance(298, step=2)
    assert starts() == 8  # still in the 300 s back-off
    await node.advance(4, step=2)
    assert starts() == 9


@pytest.mark.parametrize(("deletion", "probe_grace", "reason", "want"), [
    (None, 5, "LivenessProbe", 5),
    (None, 5, "StartupProbe", 30),  # the startup probe has no grace of its own here
    (None, None, "LivenessProbe", 30),
    (None, 5, "", 30),
    (3, 5, "LivenessProbe", 3),  # D13: the deletion's grace wins over the probe's
    (0, 5, "LivenessProbe", 0),
])
def test_kill_grace_period_as_upstream_setTerminationGracePeriod(
        deletion: int | None, probe_grace: int | None, reason: str, want: int) -> None:
    probe: dict[str, object] = {"exec": {"command": ["true"]}}
    if probe_grace is not None:
        probe["terminationGracePeriodSeconds"] = probe_grace
    pod = make_pod(containers=[{"name": "app", "image": IMAGE, "livenessProbe": probe}],
                   terminationGracePeriodSeconds=30)
    if deletion is not None:
        pod["metadata"]["deletionGracePeriodSeconds"] = deletion
    assert kill_grace_period(PodView.of(pod), KillContainer("id", "app", "", reason)) == want


async def test_pre_stop_runs_on_the_kill_after_a_failed_post_start(node: FakeNode) -> None:
    """D9, upstream startContainer -> killContainer: a failed postStart kills the container like any kill,
    preStop included; the events carry the hook's message and 'PreStopHook failed'."""
    hooks = {"postStart": {"exec": {"command": ["post"]}}, "preStop": {"exec": {"command": ["pre"]}}}
    ran: list[str] = []

    def exec_handler(cid: str, cmd: list[str]) -> ExecResult:
        ran.append(cmd[0])
        return ExecResult(exit_code=1, stderr=b"no\n")

    node.runtime.set_exec(exec_handler)
    node.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": IMAGE, "lifecycle": hooks}])])
    await node.settle()
    assert ran[:2] == ["post", "pre"]
    evs = node.events()
    post = [m for r, m in evs if r == "FailedPostStartHook"]
    assert post and post[0].startswith('Exec lifecycle hook ([post]) for Container "app" in Pod "p_default(uid-1)" failed')
    assert ("FailedPreStopHook", "PreStopHook failed") in evs
    assert ("Killing", "FailedPostStartHook") in evs
    waiting = node.container_state("app")["state"].get("waiting") or {}
    assert waiting.get("reason") in ("PostStartHookError", "CrashLoopBackOff")


async def test_a_kill_cancels_a_sync_stuck_in_a_hook(node: FakeNode) -> None:
    """Upstream pod workers cancel the running sync when the pod is killed: a postStart hook that never
    returns does not keep a removed pod alive."""
    node.runtime.hang("exec_sync")
    hooks = {"postStart": {"exec": {"command": ["sleep", "infinity"]}}}
    node.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": IMAGE, "lifecycle": hooks}])])
    await node.settle()
    assert node.runtime.running()  # started, and its postStart hangs
    node.config.set_source_pods("file", [])
    await node.advance(3)
    assert node.finished == ["uid-1"] and node.runtime.statuses() == []


async def test_image_pulls_are_serialized_and_events_read_as_1_36(node: FakeNode) -> None:
    gate = node.runtime.hang("pull_image", times=1)
    a = make_pod(name="a", uid="a", containers=[{"name": "app", "image": "img/one:1"}])
    b = make_pod(name="b", uid="b", containers=[{"name": "app", "image": "img/two:1"}])
    node.config.set_source_pods("file", [a, b])
    await node.settle()
    assert [c.op for c in node.runtime.calls].count("pull_image") == 1  # the second waits for the first
    gate.release()
    await node.settle()
    assert [c.op for c in node.runtime.calls].count("pull_image") == 2
    assert node.phase("a") == node.phase("b") == "Running"
    msgs = dict(node.events("a"))
    assert msgs["Created"] == "Container created" and msgs["Started"] == "Container started"
    pulled = msgs["Pulled"]
    assert pulled.startswith('Successfully pulled image "img/one:1" in ') and pulled.endswith(" bytes.")
    node.config.set_source_pods("file", [a, b, make_pod(name="c", uid="c", containers=[{"name": "app", "image": IMAGE}])])
    await node.settle()
    assert dict(node.events("c"))["Pulled"] == (
        f'Container image "{IMAGE}" already present on machine and can be accessed by the pod')


async def test_D15_a_new_sandbox_runs_every_init_container_again(node: FakeNode) -> None:
    """Upstream SyncPod + purgeInitContainers: when the sandbox is re-created (a runtime or node restart), the old
    init container instances are removed, so all init containers run again in order."""
    node.runtime.program("i1", Program(exit_on_start=0))
    node.runtime.program("i2", Program(exit_on_start=0))
    inits = [{"name": "i1", "image": IMAGE}, {"name": "i2", "image": IMAGE}]
    node.config.set_source_pods("file", [make_pod(inits=inits)])
    await node.settle()
    assert node.phase() == "Running"
    sandbox = next(s for s in await node.runtime.list_pod_sandboxes() if s.state.name == "READY")
    node.runtime.exit_container(sandbox.id, 0)  # the pause container dies: the sandbox must be re-created
    await node.advance(2)
    created = [c.args[1].metadata.name for c in node.runtime.calls if c.op == "create_container"]
    assert created == ["i1", "i2", "app", "i1", "i2", "app"]
    assert node.phase() == "Running"
    names = sorted(s.metadata.name for s in node.runtime.statuses())
    assert names == ["app", "app", "i1", "i2"]  # the old sandbox's init instances were purged


async def test_the_first_status_is_set_before_the_runtime_is_touched(node: FakeNode) -> None:
    """Upstream SyncPod sets the pod status before it creates the sandbox: the API sees Pending with
    ContainerCreating first, and startTime is when the kubelet took the pod, not after its containers ran."""
    seen: list[dict[str, Any]] = []
    node.statuses.add_listener(lambda _pod, status: seen.append(status or {}))
    started_at = node.clock.now()
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert node.phase() == "Running"
    first = seen[0]
    assert first["phase"] == "Pending"
    assert first["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert "podIP" not in first
    assert seen[-1]["startTime"] == first["startTime"] == rfc3339(started_at)


async def test_failed_sandbox_creation_requeues_after_the_backoff_as_upstream_completeWork(node: FakeNode) -> None:
    """upstream podWorkers.completeWork: a failed sync is requeued after backOffPeriod (10 s, jitter 0.5), so
    runtime events about the pod (here a wake every 0.4 s) do not bring the next attempt forward."""
    node.runtime.fail("run_pod_sandbox", RuntimeError_("unknown or invalid runtime name: refused"), times=10_000)
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()

    def attempts() -> int:
        return sum(1 for c in node.runtime.calls if c.op == "run_pod_sandbox")

    assert attempts() == 1
    for _ in range(150):  # 60 s
        node.workers.wake("uid-1")
        await node.advance(0.4, step=0.4)
    assert 1 + 60 // 15 <= attempts() <= 1 + 60 // 10
    [count] = [e["count"] for e in node.recorder.list("uid-1") if e["reason"] == "FailedCreatePodSandBox"]
    assert count == attempts()  # repeats bump the one event's count
    # a new version of the pod is synced at once, back-off or not (upstream UpdatePod)
    before = attempts()
    node.config.set_source_pods("file", [make_pod(activeDeadlineSeconds=600)])
    await node.settle()
    assert attempts() == before + 1
    # so is a change of what the pod uses (a ConfigMap or Secret arrived)
    node.workers.wake("uid-1", urgent=True)
    await node.settle()
    assert attempts() == before + 2


async def test_an_adopted_pods_created_sandbox_is_removed_on_the_first_sync_as_evictSandboxes(
        node: FakeNode, tmp_path: Path) -> None:
    """An agent killed between the sandbox's create and start leaves it `created`; the next agent runs the pod in
    a new sandbox and removes the unused one at once (upstream computePodActions uses the newest ready sandbox,
    kuberuntime_gc.go evictSandboxes removes the not-ready ones without containers, a minute later)."""
    node.runtime.fail("start_pod_sandbox", RuntimeError_("agent killed"))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    [interrupted] = await node.runtime.list_pod_sandboxes()
    assert interrupted.state.name == "NOTREADY"
    await node.close()
    successor = FakeNode(tmp_path, runtime=node.runtime)
    try:
        successor.config.set_source_pods("file", [make_pod()])
        await successor.settle()
        assert successor.phase() == "Running"
        sandboxes = await node.runtime.list_pod_sandboxes()
        assert [(s.metadata.attempt, s.state.name) for s in sandboxes] == [(1, "READY")]
    finally:
        await successor.close()


async def test_runtime_events_of_what_the_last_sync_saw_start_no_sync(node: FakeNode) -> None:
    """upstream's PLEG cache: the events of the pod's own sandbox and container starts come after the sync that
    made them and read them back; they bring no second relist of the pod, an exit does."""
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()

    def relists() -> int:
        return sum(1 for c in node.runtime.calls if c.op == "list_containers")

    assert node.phase() == "Running"
    assert relists() == 1  # the create's own look at the pod; the four start events after it add none
    node.runtime.exit_container(node.runtime.container_id("app"), 1)
    await node.settle()
    assert relists() == 3  # the exit's sync and its look after the restart; the restart's events add none
    assert node.container_state("app")["lastState"]["terminated"]["exitCode"] == 1
    assert sum(1 for c in node.runtime.calls if c.op == "start_container") == 2  # restarted at once


async def test_an_https_post_start_hook_answered_in_http_falls_back_with_an_event(node: FakeNode) -> None:
    """upstream runHTTPHandler: the retry over HTTP that succeeds is a LifecycleHTTPFallback Warning on the pod and
    counts in kubelet_lifecycle_handler_http_fallbacks_total; the container starts."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await reader.read(1) == b"\x16":
            writer.write(b"HTTP/1.0 400 Bad Request\r\n\r\n")
        else:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hooks = {"postStart": {"httpGet": {"host": "127.0.0.1", "port": port, "scheme": "HTTPS", "path": "/up"}}}
    async with server:
        node.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": IMAGE, "lifecycle": hooks}])])
        for _ in range(100):
            await node.settle()
            if any(r == "LifecycleHTTPFallback" for r, _ in node.events()):
                break
            await asyncio.sleep(0.02)
    assert ("LifecycleHTTPFallback", f"request to HTTPS lifecycle hook 127.0.0.1:{port} got HTTP response, "
            "retry with HTTP succeeded") in node.events()
    assert node.metrics.registry.get_sample_value("kubelet_lifecycle_handler_http_fallbacks_total") == 1
    assert not any(r == "FailedPostStartHook" for r, _ in node.events())


async def test_an_idle_resync_reads_the_state_a_later_relist_confirmed(node: FakeNode,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """upstream's syncPod reads the PLEG's cache, newer than the worker's last sync: the periodic resync of an
    idle pod asks the runtime nothing once a relist after that sync listed the pod as the sync left it; without
    such a relist, or after a change the relist saw, it reads the runtime."""
    monkeypatch.setattr("minikubelet.worker.workers.random.random", lambda: 0.0)  # resync every 10 s exactly
    node.syncer.relist_confirms = node.pleg.confirms
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert node.phase() == "Running"

    def reads() -> int:
        return sum(1 for c in node.runtime.calls if c.op in ("list_containers", "list_pod_sandboxes"))

    def syncs() -> float:
        return node.metrics.registry.get_sample_value("kubelet_pod_worker_duration_seconds_count",
                                                      {"operation_type": "sync"}) or 0.0

    async def relisting(seconds: int) -> None:
        for _ in range(seconds):
            node.clock.advance(1)
            await node.pleg.relist()
            await node.settle()

    before, synced = reads(), syncs()
    await relisting(31)  # resyncs at 10, 20 and 30 s, a relist before each
    assert syncs() == synced + 3
    assert reads() == before
    await node.advance(10)  # at 40 s: the relist at 31 s came after the sync at 30 s
    assert syncs() == synced + 4 and reads() == before

    # no relist since the last sync (40 s): the resync at 50 s reads the runtime, as before
    await node.advance(10)
    assert syncs() == synced + 5 and reads() == before + 2

    # relists after that sync list the pod as it left it: the resyncs at 60 and 70 s ask the runtime nothing
    await relisting(20)
    assert syncs() == synced + 7 and reads() == before + 2

    # a change the relist sees wakes the worker, which reads the runtime and restarts the container
    node.runtime.exit_container(node.runtime.container_id("app"), 1)
    await relisting(1)
    assert reads() > before + 2
    assert node.container_state("app")["restartCount"] == 1
    assert "running" in node.container_state("app")["state"]


async def test_a_new_pods_first_sync_reads_the_last_relist_not_the_runtime(node: FakeNode) -> None:
    """upstream's first sync of a new pod reads the PLEG's cache: a relist asked after every earlier worker ended
    and listing nothing of the pod stands for the runtime's answer (no listing); the pod starts as before."""
    node.syncer.relist_confirms = node.pleg.confirms
    node.clock.advance(1)
    await node.pleg.relist()

    def reads() -> int:
        return sum(1 for c in node.runtime.calls if c.op in ("list_containers", "list_pod_sandboxes"))

    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert node.phase() == "Running" and node.runtime.running() == [node.runtime.container_id("app")]
    assert reads() == 0
    assert [r for r, _ in node.events()] == ["Pulled", "Created", "Started"]


async def test_a_pod_whose_uid_had_a_worker_since_the_last_relist_reads_the_runtime(node: FakeNode) -> None:
    """A worker that ended after the last relist was asked may have left objects the relist did not see: the next
    new pod's first sync lists the runtime; after a later relist, the one after that does not."""
    node.syncer.relist_confirms = node.pleg.confirms
    node.clock.advance(1)
    await node.pleg.relist()
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    node.config.set_source_pods("file", [])
    await node.settle()
    assert node.finished == ["uid-1"]

    def reads() -> int:
        return sum(1 for c in node.runtime.calls if c.op in ("list_containers", "list_pod_sandboxes"))

    before = reads()
    node.config.set_source_pods("file", [make_pod(uid="uid-2", name="q")])
    await node.settle()
    assert reads() > before  # the relist came before uid-1's worker ended
    node.clock.advance(1)
    await node.pleg.relist()
    before = reads()
    node.config.set_source_pods("file", [make_pod(uid="uid-2", name="q"), make_pod(uid="uid-3", name="r")])
    await node.settle()
    assert reads() == before
    assert len(node.runtime.running()) == 2
