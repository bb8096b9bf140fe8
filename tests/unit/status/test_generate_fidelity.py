"""Divergences from the v1.36 kubelet's status generation found by review (issue 10: D3-D7, D14), as table
tests naming the upstream function each follows (pkg/kubelet/kubelet_pods.go, pkg/kubelet/status/generate.go)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.status.generate import StatusInputs, compute_status
from probes.result import ProbeResults
from tests.unit.factories import T0, c, exited, pod, running, sandbox, sidecar


def gen(p: dict[str, Any], state: PodRuntimeState, old: dict[str, Any] | None = None,
        probes: ProbeResults | None = None) -> dict[str, Any]:
    return compute_status(StatusInputs(pod=PodView.of(p), state=state, now=T0 + 100, host_ip="192.0.2.2",
                                       probes=probes or ProbeResults(), old=old))


def cond(s: dict[str, Any], t: str) -> dict[str, Any]:
    found: dict[str, Any] = next(x for x in s["conditions"] if x["type"] == t)
    return found


def test_D3_GeneratePodInitializedCondition_completed_pod_is_initialized_with_PodCompleted() -> None:
    p = pod([c("app")], inits=[c("init")], restart_policy="Never")
    sb = sandbox()
    s = gen(p, PodRuntimeState("uid-1", [sb], [exited(p, "init", 0), exited(p, "app", 0)]))
    assert s["phase"] == "Succeeded"
    init = cond(s, "Initialized")
    assert (init["status"], init.get("reason")) == ("True", "PodCompleted")


def test_D4a_getPhase_restarting_sidecar_does_not_send_an_initialized_pod_back_to_pending() -> None:
    """App crash-looping (waiting with lastState) while a sidecar restarts with its startup probe unfinished:
    the app exists in the current sandbox (HasAnyActiveRegularContainerStarted), so upstream says Running."""
    p = pod([c("app")], inits=[sidecar("proxy", startupProbe={"exec": {"command": ["true"]}})])
    sb = sandbox()
    app = replace(exited(p, "app", 1), sandbox_id=sb.id)
    proxy = replace(running(p, "proxy", restarts=2), sandbox_id=sb.id)
    reasons = {"app": ("CrashLoopBackOff", "back-off 10s")}
    s = compute_status(StatusInputs(pod=PodView.of(p), state=PodRuntimeState("uid-1", [sb], [app, proxy]),
                                    now=T0 + 100, reasons=reasons))
    assert s["phase"] == "Running"


def test_D4b_getPhase_pending_regular_init_after_sandbox_recreation() -> None:
    """A new sandbox runs the init container again; the app exited in the old sandbox: upstream Pending."""
    p = pod([c("app")], inits=[c("init")])
    old_sb, new_sb = sandbox(ready=False, attempt=0), sandbox(attempt=1)
    app = replace(exited(p, "app", 0), sandbox_id=old_sb.id)
    init = replace(running(p, "init", restarts=1), sandbox_id=new_sb.id)
    s = gen(p, PodRuntimeState("uid-1", [old_sb, new_sb], [app, init]))
    assert s["phase"] == "Pending"


def test_D5_convertToAPIContainerStatuses_resources_only_for_containers_the_runtime_knows() -> None:
    res = {"requests": {"cpu": "100m"}, "limits": {"cpu": "500m"}}
    p = pod([c("app", resources=res), c("bare")], inits=[c("init", resources=res)])
    s = gen(p, PodRuntimeState("uid-1", [sandbox()], [running(p, "init")]))
    by_name = {x["name"]: x for x in s["initContainerStatuses"] + s["containerStatuses"]}
    assert by_name["init"]["resources"] == res and by_name["init"]["allocatedResources"] == {"cpu": "100m"}
    assert "resources" not in by_name["app"] and "allocatedResources" not in by_name["app"]
    s = gen(p, PodRuntimeState("uid-1", [sandbox()], [exited(p, "init", 0), running(p, "app"), running(p, "bare")]))
    bare = next(x for x in s["containerStatuses"] if x["name"] == "bare")
    assert bare["resources"] == {} and "allocatedResources" not in bare


def test_D6_SortedContainerStatuses_orders_regular_statuses_by_name() -> None:
    p = pod([c("web"), c("app")])
    s = gen(p, PodRuntimeState("uid-1", [sandbox()], []))
    assert [x["name"] for x in s["containerStatuses"]] == ["app", "web"]


def test_D7_generateAPIPodStatus_foreign_conditions_first_and_reason_kept_while_the_phase_lasts() -> None:
    p = pod([c("app")], readinessGates=[{"conditionType": "example.com/gate"}])
    p["status"] = {"conditions": [{"type": "example.com/gate", "status": "True"}]}
    old = {"phase": "Running", "reason": "SomeReason", "message": "kept"}
    s = gen(p, PodRuntimeState("uid-1", [sandbox()], [running(p, "app")]), old=old)
    assert [x["type"] for x in s["conditions"]] == [
        "example.com/gate", "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert cond(s, "Ready")["status"] == "True"
    assert (s["reason"], s["message"]) == ("SomeReason", "kept")
    s = gen(p, PodRuntimeState("uid-1", [sandbox()], []), old=old)  # phase changes: the reason goes
    assert s["phase"] == "Pending" and "reason" not in s


def test_D14_image_is_the_runtimes_reference_once_the_container_exists() -> None:
    p = pod([c("app", image="busybox:1.36")])
    app = replace(running(p, "app"), image="docker.io/library/busybox:1.36")
    s = gen(p, PodRuntimeState("uid-1", [sandbox()], [app]))
    assert s["containerStatuses"][0]["image"] == "docker.io/library/busybox:1.36"
    assert gen(p, PodRuntimeState("uid-1", [sandbox()], []))["containerStatuses"][0]["image"] == "busybox:1.36"


def test_D14_a_removed_terminated_container_keeps_its_last_terminated_state() -> None:
    p = pod([c("app")], restart_policy="Never")
    first = gen(p, PodRuntimeState("uid-1", [sandbox()], [exited(p, "app", 3)]))
    again = gen(p, PodRuntimeState("uid-1", [sandbox()], []), old=first)
    st = again["containerStatuses"][0]
    assert st["state"]["terminated"]["exitCode"] == 3 and st["containerID"] == first["containerStatuses"][0]["containerID"]
    assert again["phase"] == "Failed"


def test_D14_a_running_container_that_vanishes_is_reported_as_ContainerStatusUnknown() -> None:
    p = pod([c("app")])
    first = gen(p, PodRuntimeState("uid-1", [sandbox()], [running(p, "app")]))
    again = gen(p, PodRuntimeState("uid-1", [sandbox()], []), old=first)
    st = again["containerStatuses"][0]
    assert st["lastState"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert st["lastState"]["terminated"]["exitCode"] == 137
    assert st["lastState"]["terminated"]["message"] == (
        "The container could not be located when the pod was deleted.  The container used to be Running")
    assert st["restartCount"] == 1 and "waiting" in st["state"]
