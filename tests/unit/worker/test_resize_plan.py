"""The in-place resize plan against upstream's tables: TestComputePodActionsForPodResize (kuberuntime_manager_test.go)
through the planner, and TestIsPodResizeInProgress."""

from __future__ import annotations

from typing import Any

import pytest

from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.worker.planner import compute_pod_actions
from minikubelet.worker.resize_plan import (
    CPU,
    MEMORY,
    ResourceValues,
    effective_requirements,
    requirements_of_values,
    resize_in_progress,
    values_of,
)
from probes.result import ProbeResults
from tests.unit.factories import c, pod, running, sandbox

Mi = 1 << 20
CPU_RESTART = {"resourceName": "cpu", "restartPolicy": "RestartContainer"}
CPU_NOT_REQUIRED = {"resourceName": "cpu", "restartPolicy": "NotRequired"}
MEM_RESTART = {"resourceName": "memory", "restartPolicy": "RestartContainer"}
MEM_NOT_REQUIRED = {"resourceName": "memory", "restartPolicy": "NotRequired"}


def three(setup: dict[str, Any]) -> dict[str, Any]:
    """Upstream's pod of three containers (foo1, foo2, foo3); `setup` gives one of them its resources."""
    containers = [c(name, resources=setup.get(name, {}).get("resources", {}),
                    **({"resizePolicy": setup[name]["policy"]} if "policy" in setup.get(name, {}) else {}))
                  for name in ("foo1", "foo2", "foo3")]
    return pod(containers)


def plan(p: dict[str, Any], actuated: dict[str, Any]) -> Any:
    view = PodView.of(p)
    state = PodRuntimeState("uid-1", [sandbox()], [running(p, n) for n in ("foo1", "foo2", "foo3")])
    ids = {s.metadata.name: s.id for s in state.containers}
    return compute_pod_actions(view, state, ProbeResults(), lambda name: actuated.get(name)), ids


def lim(cpu: str, memory: str) -> dict[str, Any]:
    return {"limits": {"cpu": cpu, "memory": memory}}


def test_update_container_cpu_and_memory_resources() -> None:
    """'Update container CPU and memory resources': both go down, each queued once."""
    actions, ids = plan(three({"foo2": {"resources": lim("100m", "100Mi")}}), {"foo2": lim("200m", "200Mi")})
    r = actions.resize
    assert [(u.name, u.container_id) for u in r.updates[MEMORY]] == [("foo2", ids["foo2"])]
    assert [u.name for u in r.updates[CPU]] == ["foo2"]
    u = r.updates[MEMORY][0]
    assert u.desired == ResourceValues(memory_limit=100 * Mi, cpu_limit=100)
    assert u.current == ResourceValues(memory_limit=200 * Mi, cpu_limit=200)
    assert not actions.containers_to_kill and not actions.containers_to_start and not r.update_pod_resources


def test_update_cpu_only_and_memory_only() -> None:
    """'Update container CPU resources' and 'Update container memory resources'."""
    actions, _ = plan(three({"foo2": {"resources": lim("100m", "100Mi")}}), {"foo2": lim("200m", "100Mi")})
    assert (len(actions.resize.updates[CPU]), len(actions.resize.updates[MEMORY])) == (1, 0)
    actions, _ = plan(three({"foo3": {"resources": lim("200m", "200Mi")}}), {"foo3": lim("200m", "100Mi")})
    assert (len(actions.resize.updates[CPU]), len(actions.resize.updates[MEMORY])) == (0, 1)


@pytest.mark.parametrize("actuated", [{"foo2": {"limits": {"cpu": "200m"}}}, {"foo2": {}}])
def test_nothing_when_allocated_and_actuated_are_equal(actuated: dict[str, Any]) -> None:
    """'Nothing when spec.Resources and status.Resources are equal' (and the besteffort one)."""
    spec = {"resources": {"limits": {"cpu": "200m"}}} if actuated["foo2"] else {"resources": {}}
    everyone = {"foo1": {}, "foo3": {}, **actuated}
    actions, _ = plan(three({"foo2": spec}), everyone)
    assert actions.idle


@pytest.mark.parametrize(("name", "policy", "limits"), [
    ("foo1", [CPU_RESTART, MEM_NOT_REQUIRED], ("200m", "200Mi")),  # ... with Restart policy for CPU
    ("foo3", [CPU_NOT_REQUIRED, MEM_RESTART], ("200m", "200Mi")),  # ... with Restart policy for memory
])
def test_restart_policy_restarts_the_container(name: str, policy: list[dict[str, str]],
                                               limits: tuple[str, str]) -> None:
    actions, ids = plan(three({name: {"resources": lim(*limits), "policy": policy}}),
                        {"foo1": {}, "foo2": {}, "foo3": {}, name: lim("100m", "100Mi")})
    assert actions.containers_to_start == [name]
    kill = actions.containers_to_kill[ids[name]]
    assert kill.message == f"Container {name} resize requires restart"
    assert actions.resize.update_pod_resources
    assert not actions.resize.updates[CPU] and not actions.resize.updates[MEMORY]


def test_a_policy_for_another_resource_does_not_restart() -> None:
    """'Update container memory resources with Restart policy for CPU' / 'CPU ... with Restart policy for memory'."""
    actions, _ = plan(three({"foo2": {"resources": lim("100m", "200Mi"), "policy": [CPU_RESTART, MEM_NOT_REQUIRED]}}),
                      {"foo2": lim("100m", "100Mi"), "foo1": {}, "foo3": {}})
    assert [u.name for u in actions.resize.updates[MEMORY]] == ["foo2"] and not actions.containers_to_start
    actions, _ = plan(three({"foo3": {"resources": lim("200m", "100Mi"), "policy": [CPU_NOT_REQUIRED, MEM_RESTART]}}),
                      {"foo3": lim("100m", "100Mi"), "foo1": {}, "foo2": {}})
    assert [u.name for u in actions.resize.updates[CPU]] == ["foo3"] and not actions.containers_to_start


def test_memory_request_only_change_follows_the_memory_policy() -> None:
    """'Update container memory (requests only) with RestartContainer / RestartNotRequired policy for memory'."""
    resources = {"limits": {"cpu": "200m", "memory": "200Mi"}, "requests": {"cpu": "100m", "memory": "100Mi"}}
    actuated = {"limits": {"cpu": "200m", "memory": "200Mi"}, "requests": {"cpu": "100m", "memory": "200Mi"}}
    actions, _ = plan(three({"foo3": {"resources": resources, "policy": [CPU_NOT_REQUIRED, MEM_RESTART]}}),
                      {"foo3": actuated, "foo1": {}, "foo2": {}})
    assert actions.containers_to_start == ["foo3"] and actions.resize.update_pod_resources
    actions, _ = plan(three({"foo3": {"resources": resources, "policy": [CPU_NOT_REQUIRED, MEM_NOT_REQUIRED]}}),
                      {"foo3": actuated, "foo1": {}, "foo2": {}})
    (u,) = actions.resize.updates[MEMORY]
    assert (u.desired.memory_request, u.current.memory_request) == (100 * Mi, 200 * Mi)


def test_decreases_are_applied_before_increases() -> None:
    """markContainerForUpdate: a decrease is prepended, an increase appended."""
    actions, _ = plan(three({"foo1": {"resources": lim("300m", "100Mi")}, "foo2": {"resources": lim("100m", "100Mi")},
                             "foo3": {"resources": lim("600m", "100Mi")}}),
                      {"foo1": lim("200m", "100Mi"), "foo2": lim("200m", "100Mi"), "foo3": lim("200m", "100Mi")})
    assert [u.name for u in actions.resize.updates[CPU]] == ["foo2", "foo1", "foo3"]


def test_missing_actuated_record_counts_as_zero() -> None:
    """Upstream: 'Proceed with the zero-value actuated resources' (an extra, idempotent update)."""
    actions, _ = plan(three({"foo1": {"resources": lim("100m", "100Mi")}}), {"foo2": {}, "foo3": {}})
    assert [u.current for u in actions.resize.updates[CPU]] == [ResourceValues()]


def test_pod_level_limits_bound_containers_without_their_own() -> None:
    """containerResourcesFromRequirements with pod-level limits (InPlacePodLevelResourcesVerticalScaling)."""
    p = pod([c("a", resources={"requests": {"cpu": "50m"}})],
            resources={"limits": {"cpu": "500m", "memory": "64Mi"}})
    view = PodView.of(p)
    a = view.container("a")
    assert values_of(view, {"requests": a.requests, "limits": a.limits}) == ResourceValues(64 * Mi, 0, 500, 50)
    assert effective_requirements(view, a) == {"requests": {"cpu": "50m"}, "limits": {"cpu": "500m", "memory": "64Mi"}}


def test_resize_in_progress_for_running_sidecars_and_regular_containers_only() -> None:
    """TestIsPodResizeInProgress: running containers whose actuated values differ; a regular init container and a
    container that does not run do not count."""
    p = pod([c("app", resources=lim("200m", "64Mi")), c("idle", resources=lim("200m", "64Mi"))],
            inits=[c("init", resources=lim("200m", "64Mi")),
                   c("side", restartPolicy="Always", resources=lim("200m", "64Mi"))])
    view = PodView.of(p)
    state = PodRuntimeState("uid-1", [sandbox()], [running(p, "app"), running(p, "side"), running(p, "init")])
    same = lim("200m", "64Mi")
    assert not resize_in_progress(view, state, lambda name: {"idle": lim("1", "1Gi")}.get(name, same))
    assert not resize_in_progress(view, state, lambda name: {"init": lim("1", "1Gi")}.get(name, same))
    assert resize_in_progress(view, state, lambda name: {"side": lim("100m", "64Mi")}.get(name, same))
    assert resize_in_progress(view, state, lambda name: {"app": lim("200m", "32Mi")}.get(name, same))


def test_values_back_to_records() -> None:
    assert requirements_of_values(ResourceValues(64 * Mi, 32 * Mi, 1500, 0)) == {
        "requests": {"memory": "32Mi"}, "limits": {"cpu": "1500m", "memory": "64Mi"}}


def test_sidecars_resize_in_place_or_restart_as_their_policy_says() -> None:
    """computeInitContainerActions: a running sidecar is resized like a regular container; RestartContainer
    restarts it as an init container."""
    for policy, restarts in (([], False), ([MEM_RESTART], True)):
        p = pod([c("app")], inits=[c("side", restartPolicy="Always", resizePolicy=policy,
                                     resources=lim("100m", "64Mi"))])
        view = PodView.of(p)
        side, main = running(p, "side"), running(p, "app")
        state = PodRuntimeState("uid-1", [sandbox()], [side, main])
        actions = compute_pod_actions(view, state, ProbeResults(),
                                      lambda name: {"side": lim("100m", "32Mi")}.get(name, {}))
        if restarts:
            assert actions.init_to_start == ["side"] and side.id in actions.containers_to_kill
            assert not actions.resize.updates[MEMORY]
        else:
            assert [u.name for u in actions.resize.updates[MEMORY]] == ["side"] and not actions.init_to_start
