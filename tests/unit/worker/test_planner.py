from __future__ import annotations

from typing import Any

import pytest

from cri.types import ContainerStatus, PodSandboxStatus
from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.worker.planner import PodActions, compute_pod_actions
from probes.result import ProbeResults, Result
from tests.unit.factories import c, exited, pod, running, sandbox, sidecar


def plan(
    p: dict[str, Any],
    *containers: ContainerStatus,
    sandboxes: list[PodSandboxStatus] | None = None,
    probes: ProbeResults | None = None,
) -> PodActions:
    state = PodRuntimeState("uid-1", list(sandboxes if sandboxes is not None else [sandbox()]), list(containers))
    return compute_pod_actions(PodView.of(p), state, probes or ProbeResults())


def test_fresh_pod_creates_sandbox_and_starts_app_containers() -> None:
    p = pod([c("a"), c("b")])
    a = plan(p, sandboxes=[])
    assert a.create_sandbox and not a.kill_pod and a.attempt == 0
    assert a.containers_to_start == ["a", "b"]


def test_fresh_pod_with_inits_starts_only_the_first_init() -> None:
    p = pod([c("app")], inits=[c("i1"), c("i2")])
    a = plan(p, sandboxes=[])
    assert a.create_sandbox and a.init_to_start == ["i1"] and a.containers_to_start == []


# Regular containers: restart policy x exit code.
@pytest.mark.parametrize(
    ("policy", "code", "restart"),
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 1, True),
        ("Never", 0, False),
        ("Never", 1, False),
    ],
)
def test_regular_container_restart_matrix(policy: str, code: int, restart: bool) -> None:
    p = pod([c("app")], restart_policy=policy)
    a = plan(p, exited(p, "app", code))
    assert (a.containers_to_start == ["app"]) is restart
    # nothing left to run: the pod is done and its sandbox is stopped
    assert a.kill_pod is (not restart)


# Regular init containers: pod Always acts as OnFailure; Never fails the pod.
@pytest.mark.parametrize(
    ("policy", "code", "expect"),
    [
        ("Always", 0, "next"),
        ("Always", 1, "retry"),
        ("OnFailure", 0, "next"),
        ("OnFailure", 1, "retry"),
        ("Never", 0, "next"),
        ("Never", 1, "fail"),
    ],
)
def test_init_container_restart_matrix(policy: str, code: int, expect: str) -> None:
    p = pod([c("app")], inits=[c("i1"), c("i2")], restart_policy=policy)
    a = plan(p, exited(p, "i1", code))
    if expect == "next":
        assert a.init_to_start == ["i2"] and not a.kill_pod
    elif expect == "retry":
        assert a.init_to_start == ["i1"] and not a.kill_pod
    else:
        assert a.kill_pod and a.init_to_start == [] and a.containers_to_start == []


@pytest.mark.parametrize("policy", ["Always", "OnFailure", "Never"])
@pytest.mark.parametrize("code", [0, 1, 137])
def test_sidecar_is_restarted_whatever_the_pod_policy(policy: str, code: int) -> None:
    p = pod([c("app")], inits=[sidecar("side")], restart_policy=policy)
    a = plan(p, exited(p, "side", code), running(p, "app"))
    assert a.init_to_start == ["side"]
    assert not a.kill_pod and a.containers_to_start == []


def test_running_init_container_blocks_everything_after_it() -> None:
    p = pod([c("app")], inits=[c("i1"), c("i2")])
    a = plan(p, running(p, "i1"))
    assert a.idle


def test_last_init_done_starts_app_containers() -> None:
    p = pod([c("a"), c("b")], inits=[c("i1"), c("i2")])
    a = plan(p, exited(p, "i1", 0), exited(p, "i2", 0))
    assert a.containers_to_start == ["a", "b"]


def test_sidecar_started_lets_next_init_start() -> None:
    p = pod([c("app")], inits=[sidecar("side"), c("i2")])
    a = plan(p, running(p, "side"))
    assert a.init_to_start == ["i2"]


def test_sidecar_with_pending_startup_probe_holds_next_init() -> None:
    p = pod([c("app")], inits=[sidecar("side", startupProbe={"exec": {"command": ["true"]}}), c("i2")])
    side = running(p, "side")
    assert plan(p, side).idle
    a = plan(p, side, probes=ProbeResults(startup={side.id: Result.SUCCESS}))
    assert a.init_to_start == ["i2"]


def test_sidecar_failing_startup_probe_is_restarted() -> None:
    p = pod([c("app")], inits=[sidecar("side", startupProbe={"exec": {"command": ["true"]}}), c("i2")])
    side = running(p, "side")
    a = plan(p, side, probes=ProbeResults(startup={side.id: Result.FAILURE}))
    assert side.id in a.containers_to_kill and a.init_to_start == ["side"]


def test_job_pod_with_sidecar_finishes_when_app_exits() -> None:
    p = pod([c("app")], inits=[sidecar("side")], restart_policy="Never")
    a = plan(p, running(p, "side"), exited(p, "app", 0))
    assert a.kill_pod


def test_completed_inits_are_not_rerun_after_app_started() -> None:
    p = pod([c("app")], inits=[c("i1")])
    assert plan(p, running(p, "app")).idle  # i1 was garbage-collected


def test_liveness_failure_kills_and_restarts_unless_never() -> None:
    for policy, restart in (("Always", True), ("OnFailure", True), ("Never", False)):
        p = pod([c("app", livenessProbe={"tcpSocket": {"port": 80}})], restart_policy=policy)
        app = running(p, "app")
        a = plan(p, app, probes=ProbeResults(liveness={app.id: Result.FAILURE}))
        kill = a.containers_to_kill[app.id]
        assert kill.reason == "LivenessProbe"
        assert (a.containers_to_start == ["app"]) is restart
        assert kill.message == "Container app failed liveness probe" + (", will be restarted" if restart else "")


def test_changed_spec_restarts_container() -> None:
    p = pod([c("app")])
    app = running(p, "app")
    p2 = pod([c("app", image="busybox:1.37")], restart_policy="Never")
    a = plan(p2, app)
    assert a.containers_to_kill[app.id].message == "Container app definition changed, will be restarted"
    assert a.containers_to_start == ["app"]


def test_dead_sandbox_is_recreated_with_next_attempt() -> None:
    p = pod([c("app")])
    a = plan(p, running(p, "app"), sandboxes=[sandbox(ready=False, attempt=2)])
    assert a.create_sandbox and a.kill_pod and a.attempt == 3


def test_dead_sandbox_of_never_pod_is_not_recreated() -> None:
    p = pod([c("app")], restart_policy="Never")
    a = plan(p, exited(p, "app", 0), sandboxes=[sandbox(ready=False, attempt=0), sandbox(ready=False, attempt=1)])
    assert not a.create_sandbox and a.kill_pod


def test_deleted_pod_restarts_nothing() -> None:
    p = pod([c("app")])
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    a = plan(p, exited(p, "app", 1))
    assert a.containers_to_start == [] and a.kill_pod


def test_sidecar_with_unknown_startup_result_holds_next_init() -> None:
    p = pod([c("app")], inits=[sidecar("side", startupProbe={"exec": {"command": ["true"]}}), c("i2")])
    side = running(p, "side")
    assert plan(p, side, probes=ProbeResults(startup={side.id: Result.UNKNOWN})).idle
