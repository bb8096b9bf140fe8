"""The status a killed pod ends with (upstream SyncTerminatingPod, pod_workers.go UpdatePod/acknowledgeTerminating)
on the fake runtime and the fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from cri.fake import Program
from minikubelet.base.podview import Pod
from minikubelet.eviction.manager import evicted_status_fn
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle
from tests.unit.fake_node import FakeNode, make_pod

NOW = "2026-11-28T16:00:00Z"


async def _running(node: FakeNode, **spec: Any) -> tuple[Pod, list[dict[str, Any]]]:
    pod = make_pod(terminationGracePeriodSeconds=30, **spec)
    pod["metadata"]["annotations"]["kubernetes.io/config.source"] = "api"  # static pods never turn terminal
    node.config.set_source_pods("api", [pod])
    await node.settle()
    written: list[dict[str, Any]] = []
    node.statuses.add_listener(lambda _pod, status: written.append(status) if status is not None else None)
    w = node.workers.get("uid-1")
    assert w is not None and node.phase() == "Running"
    return w.pod, written


def _conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


@pytest.mark.parametrize("restart_policy", ["Always", "Never"])
async def test_SyncTerminatingPod_status_fn_applies_only_before_the_kill(node: FakeNode, restart_policy: str) -> None:
    """upstream SyncTerminatingPod + generateAPIPodStatus(podIsTerminal) + getPhase: the eviction's status is the
    one written before the kill; a container exiting 0 on SIGTERM then ends the pod Succeeded, without the
    eviction's reason and message (they belong to the Failed phase), its DisruptionTarget kept."""
    node.runtime.program("app", Program(stop_exit_code=0))
    pod, written = await _running(node, restartPolicy=restart_policy)
    node.workers.update_pod(pod, kill=KillPodOptions(grace_override=1, status_fn=evicted_status_fn(
        "The node was low on resource: memory. ", NOW, None, condition=True)))
    await node.settle()
    w = node.workers.get("uid-1")
    assert w is not None and w.lifecycle is PodLifecycle.TERMINATED
    before_kill = next(s for s in written if s["phase"] == "Failed")
    assert before_kill["reason"] == "Evicted" and _conditions(before_kill)["DisruptionTarget"] == "True"
    final = node.statuses.get_pod_status("uid-1")
    assert final is not None and final["phase"] == "Succeeded"
    assert "reason" not in final and "message" not in final
    assert _conditions(final)["DisruptionTarget"] == "True"
    assert final["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    # the terminated pod's later syncs (SyncTerminatedPod) do not bring the kill's status back
    await node.advance(30, step=5)
    final = node.statuses.get_pod_status("uid-1")
    assert final is not None and final["phase"] == "Succeeded" and "reason" not in final


async def test_SyncTerminatingPod_killed_by_sigterm_stays_failed_evicted(node: FakeNode) -> None:
    """upstream generateAPIPodStatus: the same (Failed) phase keeps the eviction's reason and message."""
    pod, _ = await _running(node)
    node.workers.update_pod(pod, kill=KillPodOptions(grace_override=1, status_fn=evicted_status_fn(
        "low", NOW, None, condition=True)))
    await node.settle()
    final = node.statuses.get_pod_status("uid-1")
    assert final is not None and (final["phase"], final["reason"], final["message"]) == ("Failed", "Evicted", "low")
    assert final["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143


async def test_UpdatePod_the_last_kill_status_function_wins(node: FakeNode) -> None:
    """upstream UpdatePod appends every kill's PodStatusFunc (statusPostTerminating) and acknowledgeTerminating
    hands SyncTerminatingPod the last; a later kill without one (a deletion) leaves it."""
    pod, written = await _running(node)
    node.workers.update_pod(pod, kill=KillPodOptions(grace_override=1, status_fn=evicted_status_fn(
        "first", NOW, None, condition=True)))
    node.workers.update_pod(pod, kill=KillPodOptions(grace_override=1, status_fn=evicted_status_fn(
        "second", NOW, None, condition=True)))
    node.workers.update_pod(pod, kill=KillPodOptions(grace_override=1))
    await node.settle()
    assert next(s.get("message") for s in written if s["phase"] == "Failed") == "second"
    final = node.statuses.get_pod_status("uid-1")
    assert final is not None and (final["phase"], final["message"]) == ("Failed", "second")
