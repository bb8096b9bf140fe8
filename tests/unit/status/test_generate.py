from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from cri.types import ContainerStatus, PodSandboxStatus
from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.status.generate import StatusInputs, compute_status
from probes.result import ProbeResults, Result
from tests.fixtures import KUBERNETES
from tests.unit.factories import T0, c, exited, pod, running, sandbox, sidecar

FIXTURES = KUBERNETES
S = Result.SUCCESS


def status(
    p: dict[str, Any],
    *containers: ContainerStatus,
    sandboxes: list[PodSandboxStatus] | None = None,
    startup: Mapping[str, Result] | None = None,
    readiness: Mapping[str, Result] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    state = PodRuntimeState("uid-1", list(sandboxes if sandboxes is not None else [sandbox()]), list(containers))
    probes = ProbeResults(startup=startup or {}, readiness=readiness or {})
    return compute_status(
        StatusInputs(pod=PodView.of(p), state=state, now=T0 + 100, host_ip="192.0.2.2", probes=probes, **kw)
    )


def cond(s: Mapping[str, Any], t: str) -> dict[str, Any]:
    found: dict[str, Any] = next(x for x in s["conditions"] if x["type"] == t)
    return found


def test_running_pod_all_conditions_true() -> None:
    p = pod([c("app")])
    s = status(p, running(p, "app"))
    assert s["phase"] == "Running"
    assert [x["type"] for x in s["conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert all(x["status"] == "True" for x in s["conditions"])
    cs = s["containerStatuses"][0]
    assert cs["ready"] and cs["started"] and "running" in cs["state"]
    assert cs["containerID"].startswith("docker://")
    assert s["podIP"] == "10.0.0.2" and s["podIPs"] == [{"ip": "10.0.0.2"}]
    assert s["hostIP"] == "192.0.2.2"


def test_fresh_pod_waits_in_container_creating() -> None:
    p = pod([c("app")])
    s = status(p, sandboxes=[])
    assert s["phase"] == "Pending"
    assert s["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert cond(s, "PodReadyToStartContainers")["status"] == "False"
    assert cond(s, "Ready")["message"] == "containers with unready status: [app]"


@pytest.mark.parametrize(
    ("policy", "codes", "phase"),
    [
        ("Never", [0, 0], "Succeeded"),
        ("Never", [0, 1], "Failed"),
        ("OnFailure", [0, 0], "Succeeded"),
        ("OnFailure", [0, 1], "Running"),  # the failed one will be restarted
        ("Always", [0, 0], "Running"),
        ("Always", [1, 1], "Running"),
    ],
)
def test_phase_after_containers_exit(policy: str, codes: list[int], phase: str) -> None:
    p = pod([c("a"), c("b")], restart_policy=policy)
    s = status(p, exited(p, "a", codes[0]), exited(p, "b", codes[1]))
    assert s["phase"] == phase


def test_succeeded_pod_conditions_say_pod_completed() -> None:
    p = pod([c("a")], restart_policy="Never")
    s = status(p, exited(p, "a", 0))
    assert cond(s, "ContainersReady")["reason"] == "PodCompleted"
    assert cond(s, "Ready")["reason"] == "PodCompleted"


def test_init_progress_pending_with_pod_initializing() -> None:
    p = pod([c("app")], inits=[c("i1"), c("i2")])
    s = status(p, running(p, "i1"))
    assert s["phase"] == "Pending"
    assert s["initContainerStatuses"][1]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert s["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    ini = cond(s, "Initialized")
    assert ini["status"] == "False" and ini["reason"] == "ContainersNotInitialized"
    assert ini["message"] == "containers with incomplete status: [i1 i2]"


def test_failed_init_with_never_fails_pod() -> None:
    p = pod([c("app")], inits=[c("i1")], restart_policy="Never")
    assert status(p, exited(p, "i1", 2))["phase"] == "Failed"


def test_crash_looping_init_keeps_pod_pending() -> None:
    p = pod([c("app")], inits=[c("i1")])
    s = status(p, exited(p, "i1", 1), reasons={"i1": ("CrashLoopBackOff", "back-off 10s ...")})
    assert s["phase"] == "Pending"
    st = s["initContainerStatuses"][0]
    assert st["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert st["lastState"]["terminated"]["exitCode"] == 1


def test_job_pod_succeeds_although_sidecar_was_killed() -> None:
    p = pod([c("app")], inits=[sidecar("side")], restart_policy="Never")
    s = status(p, exited(p, "side", 137, reason="Error"), exited(p, "app", 0))
    assert s["phase"] == "Succeeded"


def test_unstarted_sidecar_keeps_pod_pending() -> None:
    p = pod([c("app")], inits=[sidecar("side", startupProbe={"exec": {"command": ["x"]}})])
    side = running(p, "side")
    assert status(p, side)["phase"] == "Pending"
    s = status(p, side, startup={side.id: S})
    side_status = s["initContainerStatuses"][0]
    assert side_status["started"] and side_status["ready"]


def test_sidecar_restart_after_app_started_does_not_go_back_to_pending() -> None:
    p = pod([c("app")], inits=[sidecar("side")])
    s = status(p, exited(p, "side", 1), running(p, "app"), reasons={"side": ("CrashLoopBackOff", "x")})
    assert s["phase"] == "Running"
    assert cond(s, "Initialized")["status"] == "True"


def test_readiness_probe_drives_ready_and_gates() -> None:
    p = pod([c("app", readinessProbe={"tcpSocket": {"port": 1}})],
            readinessGates=[{"conditionType": "example.com/gate"}])
    app = running(p, "app")
    s = status(p, app)
    assert not s["containerStatuses"][0]["ready"]  # no result yet reads as failure
    s = status(p, app, readiness={app.id: S})
    assert cond(s, "ContainersReady")["status"] == "True"
    ready = cond(s, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReadinessGatesNotReady"
    p["status"] = {"conditions": [{"type": "example.com/gate", "status": "True"}]}
    s = status(p, app, readiness={app.id: S})
    assert cond(s, "Ready")["status"] == "True"
    assert cond(s, "example.com/gate")["status"] == "True"  # conditions the agent does not own are kept


def test_last_transition_time_only_moves_on_change() -> None:
    p = pod([c("app")])
    app = running(p, "app")
    state = PodRuntimeState("uid-1", [sandbox()], [app])
    view = PodView.of(p)
    first = compute_status(StatusInputs(pod=view, state=state, now=T0))
    again = compute_status(StatusInputs(pod=view, state=state, now=T0 + 50, old=first))
    assert cond(again, "Ready")["lastTransitionTime"] == cond(first, "Ready")["lastTransitionTime"]
    assert again["startTime"] == first["startTime"]
    state2 = PodRuntimeState("uid-1", [sandbox()], [exited(p, "app", 1)])
    later = compute_status(StatusInputs(pod=view, state=state2, now=T0 + 90, old=again))
    assert cond(later, "Ready")["lastTransitionTime"] != cond(first, "Ready")["lastTransitionTime"]


def test_terminal_phase_is_sticky() -> None:
    p = pod([c("app")], restart_policy="Never")
    done = status(p, exited(p, "app", 0))
    assert done["phase"] == "Succeeded"
    p2 = pod([c("app")], restart_policy="Never")
    again = status(p2, running(p2, "app"), old=done)
    assert again["phase"] == "Succeeded"


def test_deadline_override() -> None:
    p = pod([c("app")])
    s = status(p, running(p, "app"), override=("Failed", "DeadlineExceeded", "too long"))
    assert (s["phase"], s["reason"], s["message"]) == ("Failed", "DeadlineExceeded", "too long")


def test_restart_count_and_last_state_across_attempts() -> None:
    p = pod([c("app")])
    s = status(p, exited(p, "app", 1, restarts=1, finished_at=T0 + 20), exited(p, "app", 1, restarts=0),
               reasons={"app": ("CrashLoopBackOff", "back-off 10s restarting failed container=app pod=p_default(uid-1)")})
    cs = s["containerStatuses"][0]
    assert cs["restartCount"] == 1
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert s["phase"] == "Running"


def test_matches_real_kubelet_crashloop_fixture() -> None:
    fx = json.loads((FIXTURES / "pod-real-kubelet-crashloopbackoff.json").read_text())["response"]["body"]
    p = {"metadata": {"name": "rich", "namespace": "default", "uid": "uid-1"}, "spec": fx["spec"]}
    init = exited(p, "init-setup", 0)
    side = running(p, "sidecar-logger")
    main = exited(p, "main", 1, restarts=2)
    s = status(p, init, side, main, reasons={"main": ("CrashLoopBackOff", "back-off 20s ...")},
               readiness={side.id: S}, startup={side.id: S})
    want = fx["status"]
    assert s["phase"] == want["phase"]
    strip = ("lastTransitionTime", "observedGeneration")
    assert [{k: v for k, v in x.items() if k not in strip} for x in s["conditions"]] == [
        {k: v for k, v in x.items() if k not in strip} for x in want["conditions"]]
    for got, exp in zip(s["initContainerStatuses"], want["initContainerStatuses"], strict=True):
        assert (got["ready"], got["started"], list(got["state"])) == (exp["ready"], exp["started"], list(exp["state"]))
    got_main, exp_main = s["containerStatuses"][0], want["containerStatuses"][0]
    assert got_main["state"]["waiting"]["reason"] == exp_main["state"]["waiting"]["reason"]
    assert got_main["restartCount"] == exp_main["restartCount"]
    assert got_main["lastState"]["terminated"]["reason"] == exp_main["lastState"]["terminated"]["reason"]
    assert got_main["volumeMounts"] == exp_main["volumeMounts"]
    assert got_main["resources"] == exp_main["resources"]
    assert got_main["allocatedResources"] == exp_main["allocatedResources"]


def test_matches_real_kubelet_init_image_pull_fixture() -> None:
    fx = json.loads((FIXTURES / "pod-real-kubelet-init-errimagepull.json").read_text())["response"]["body"]
    p = {"metadata": {"name": "rich", "namespace": "default", "uid": "uid-1"}, "spec": fx["spec"]}
    s = status(p, reasons={"init-setup": ("ImagePullBackOff", 'Back-off pulling image "x"')})
    want = fx["status"]
    assert s["phase"] == want["phase"] == "Pending"
    for t in ("Initialized", "Ready", "ContainersReady"):
        assert (cond(s, t)["reason"], cond(s, t).get("message")) == (
            next(x for x in want["conditions"] if x["type"] == t)["reason"],
            next(x for x in want["conditions"] if x["type"] == t)["message"])
    assert s["initContainerStatuses"][1]["state"] == want["initContainerStatuses"][1]["state"]
    assert s["containerStatuses"][0]["state"] == want["containerStatuses"][0]["state"]


def test_last_state_of_a_removed_container_is_kept_from_the_previous_status() -> None:
    p = pod([c("app")])
    first = status(p, running(p, "app", restarts=1), exited(p, "app", 3, restarts=0))
    assert first["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 3
    again = status(p, sandboxes=[], old=first)  # the runtime lost every attempt
    cs = again["containerStatuses"][0]
    assert cs["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert cs["restartCount"] == 1
    assert cs["lastState"] == first["containerStatuses"][0]["lastState"]


def test_dual_stack_pod_reports_both_families_primary_first() -> None:
    from dataclasses import replace

    p = pod([c("app")])
    dual = replace(sandbox(ip="10.244.1.2"), additional_ips=("fd00:10:244:1::2", "fd00:10:244:1::3"))
    s = status(p, running(p, "app"), sandboxes=[dual])
    assert s["podIP"] == "10.244.1.2"
    assert s["podIPs"] == [{"ip": "10.244.1.2"}, {"ip": "fd00:10:244:1::2"}]  # one per family, as upstream
    host = pod([c("app")])
    host["spec"]["hostNetwork"] = True
    assert status(host, running(host, "app"), sandboxes=[dual])["podIPs"] == [{"ip": "192.0.2.2"}]
