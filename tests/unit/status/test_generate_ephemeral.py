"""ephemeralContainerStatuses as upstream generateAPIPodStatus builds them (convertToAPIContainerStatuses over
spec.ephemeralContainers, isInitContainer false; normalizeStatus sorts them by name): read from the runtime,
never from the spec, and never part of the phase, Ready or ContainersReady."""

from __future__ import annotations

from typing import Any

from cri.types import ContainerStatus
from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.status.generate import StatusInputs, compute_status
from minikubelet.status.manager import normalize_status
from tests.unit.factories import T0, c, exited, pod, running, sandbox


def status(p: dict[str, Any], *containers: ContainerStatus, **kw: Any) -> dict[str, Any]:
    state = PodRuntimeState("uid-1", [sandbox()], list(containers))
    return compute_status(StatusInputs(pod=PodView.of(p), state=state, now=T0 + 100, **kw))


def debug_pod(*names: str) -> dict[str, Any]:
    return pod([c("app")], ephemeralContainers=[c(n, targetContainerName="app") for n in names])


def test_no_ephemeral_containers_no_key() -> None:
    p = pod([c("app")])
    assert "ephemeralContainerStatuses" not in status(p, running(p, "app"))


def test_not_started_yet_waits_in_container_creating() -> None:
    p = debug_pod("dbg")
    s = status(p, running(p, "app"))
    assert s["ephemeralContainerStatuses"] == [{
        "name": "dbg", "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}, "ready": False,
        "restartCount": 0, "image": "busybox:1.36", "imageID": ""}]


def test_completed_with_termination_message_and_upstream_fields() -> None:
    p = debug_pod("dbg")
    done = exited(p, "dbg", 0)
    s = status(p, running(p, "app"), done, termination_messages={done.id: "debugged\n"})
    (eph,) = s["ephemeralContainerStatuses"]
    assert eph == {
        "name": "dbg",
        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": "debugged\n",
                                 "startedAt": "2023-11-14T22:13:25Z", "finishedAt": "2023-11-14T22:13:30Z",
                                 "containerID": f"docker://{done.id}"}},
        "lastState": {}, "ready": False, "restartCount": 0, "image": "busybox:1.36",
        "imageID": "docker://sha256:abc", "containerID": f"docker://{done.id}", "resources": {}}
    # the phase and the readiness are the regular containers' alone
    assert s["phase"] == "Running"
    assert {x["type"]: x["status"] for x in s["conditions"]}["Ready"] == "True"


def test_running_ephemeral_container_is_never_ready_nor_started() -> None:
    p = debug_pod("dbg")
    s = status(p, running(p, "app"), running(p, "dbg"))
    (eph,) = s["ephemeralContainerStatuses"]
    assert "running" in eph["state"] and eph["ready"] is False and "started" not in eph


def test_a_failed_ephemeral_container_does_not_fail_the_pod() -> None:
    p = debug_pod("dbg")
    p["spec"]["restartPolicy"] = "Never"
    s = status(p, running(p, "app"), exited(p, "dbg", 3))
    assert s["phase"] == "Running"
    assert s["ephemeralContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_pull_failure_reason_shows_in_the_ephemeral_status() -> None:
    p = debug_pod("dbg")
    s = status(p, running(p, "app"), reasons={"dbg": ("ImagePullBackOff", 'Back-off pulling image "nope"')})
    assert s["ephemeralContainerStatuses"][0]["state"] == {
        "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope"'}}
    assert s["phase"] == "Running"


def test_sorted_by_name_and_messages_share_the_budget_with_every_container() -> None:
    """normalizeStatus: the 12 KiB of termination messages are split over all containers, ephemeral ones too."""
    p = debug_pod("zz", "aa")
    z, a = exited(p, "zz", 0), exited(p, "aa", 0)
    s = status(p, running(p, "app"), z, a, termination_messages={z.id: "x" * 12288, a.id: "ok"})
    assert [e["name"] for e in s["ephemeralContainerStatuses"]] == ["aa", "zz"]
    norm = normalize_status(p, s)
    assert len(norm["ephemeralContainerStatuses"][1]["state"]["terminated"]["message"]) == 12288 // 3
