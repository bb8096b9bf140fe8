"""Ephemeral containers in the planner: upstream kuberuntime_manager_test.go
TestComputePodActionsWithInitAndEphemeralContainers, case by case, on the same base pod (three regular
containers, one completed init container, one running ephemeral container `debug`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cri.types import ContainerState, ContainerStatus, PodSandboxStatus
from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.worker.planner import PodActions, compute_pod_actions
from probes.result import ProbeResults
from tests.unit.factories import c, exited, pod, running, sandbox


def base(restart_policy: str = "Always", ephemeral: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return pod([c("foo1"), c("foo2"), c("foo3")], inits=[c("init1")], restart_policy=restart_policy,
               ephemeralContainers=ephemeral if ephemeral is not None else [c("debug")])


def base_status(p: dict[str, Any]) -> list[ContainerStatus]:
    """Upstream's order: the three regular containers, the init container, then the ephemeral one."""
    return [running(p, "foo1"), running(p, "foo2"), running(p, "foo3"), exited(p, "init1", 0),
            running(p, "debug")]


def plan(p: dict[str, Any], containers: list[ContainerStatus], sandboxes: list[PodSandboxStatus] | None = None
         ) -> PodActions:
    state = PodRuntimeState("uid-1", sandboxes or [sandbox()], containers)
    return compute_pod_actions(PodView.of(p), state, ProbeResults())


def test_steady_state_ignores_the_ephemeral_container() -> None:
    p = base()
    assert plan(p, base_status(p)).idle


def test_no_ephemeral_container_running_starts_one() -> None:
    p = base()
    a = plan(p, base_status(p)[:4])
    assert (a.ephemeral_to_start, a.containers_to_start, a.init_to_start, a.kill_pod) == (["debug"], [], [], False)
    assert a.containers_to_kill == {}


def test_start_second_ephemeral_container() -> None:
    p = base(ephemeral=[c("debug"), c("debug2")])
    a = plan(p, base_status(p))
    assert a.ephemeral_to_start == ["debug2"] and not a.containers_to_start and not a.kill_pod


@pytest.mark.parametrize("policy", ["Always", "OnFailure", "Never"])
@pytest.mark.parametrize("code", [0, 1])
def test_ephemeral_container_exited_is_never_restarted(policy: str, code: int) -> None:
    p = base(policy)
    containers = base_status(p)
    containers[4] = exited(p, "debug", code)
    assert plan(p, containers).idle


def test_initialization_in_progress_still_starts_the_ephemeral_container() -> None:
    p = base()
    containers = base_status(p)[:4]
    containers[3] = running(p, "init1")
    a = plan(p, containers[3:])  # only the init container exists, and runs
    assert (a.ephemeral_to_start, a.containers_to_start, a.init_to_start) == (["debug"], [], [])


@pytest.mark.parametrize("policy", ["OnFailure", "Always"])
def test_dead_sandbox_kills_the_pod_and_does_not_restart_the_ephemeral_container(policy: str) -> None:
    p = base(policy)
    containers = base_status(p)
    if policy == "OnFailure":  # upstream: the init container failed, only it and the ephemeral one are left
        containers = [exited(p, "init1", 137), containers[4]]
    a = plan(p, containers, sandboxes=[sandbox(ready=False)])
    assert (a.kill_pod, a.create_sandbox, a.attempt, a.init_to_start) == (True, True, 1, ["init1"])
    assert a.ephemeral_to_start == [] and a.containers_to_start == []


def test_pod_killed_when_all_containers_exited_but_the_ephemeral_one() -> None:
    p = base("Never")
    containers = base_status(p)
    containers[:3] = [exited(p, n, 0) for n in ("foo1", "foo2", "foo3")]
    a = plan(p, containers)
    assert a.kill_pod and not a.create_sandbox and a.ephemeral_to_start == [] and a.containers_to_kill == {}


def test_ephemeral_container_in_unknown_state_is_left_alone() -> None:
    p = base("Never")
    containers = base_status(p)
    containers[4] = replace(containers[4], state=ContainerState.UNKNOWN)
    assert plan(p, containers).idle


def test_nothing_ephemeral_starts_in_a_pod_about_to_stop() -> None:
    """Divergence kept small: upstream lists it and fails to start it in the stopped sandbox; here not listed."""
    p = base("Never", ephemeral=[c("debug"), c("late")])
    containers = base_status(p)
    containers[:3] = [exited(p, n, 0) for n in ("foo1", "foo2", "foo3")]
    a = plan(p, containers)
    assert a.kill_pod and a.ephemeral_to_start == []
