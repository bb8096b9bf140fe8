"""Ephemeral containers through the pod worker on the fake runtime (upstream SyncPod step 6, startContainer's
getTargetID, killContainersWithSyncResult): added to a running pod they start at once in its sandbox, join their
target's PID namespace, are never restarted, fail without touching the other containers, and stop with the pod."""

from __future__ import annotations

import copy
from typing import Any

from cri.types import ContainerState
from minikubelet.base.podview import Pod
from tests.unit.fake_node import IMAGE, FakeNode, make_pod

DEBUG = {"name": "dbg", "image": IMAGE, "targetContainerName": "app", "terminationMessagePath": "/dev/termination-log",
         "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}


def with_debug(pod: Pod, *containers: dict[str, Any]) -> Pod:
    out = copy.deepcopy(pod)
    out["spec"]["ephemeralContainers"] = list(containers or [DEBUG])
    return out


def starts(node: FakeNode, name: str) -> int:
    return sum(1 for s in node.runtime.statuses() if s.metadata.name == name)


async def test_added_to_a_running_pod_it_starts_in_the_sandbox_sharing_the_targets_processes(node: FakeNode) -> None:
    pod = make_pod()
    node.config.set_source_pods("file", [pod])
    await node.settle()
    assert node.phase() == "Running"
    node.config.set_source_pods("file", [with_debug(pod)])
    await node.settle()
    app, dbg = node.runtime.container_id("app", "uid-1"), node.runtime.container_id("dbg", "uid-1")
    assert node.runtime.pid_target(dbg) == app
    assert node.runtime.pid_namespace(dbg) == node.runtime.pid_namespace(app)
    status = node.runtime.statuses()
    assert {s.sandbox_id for s in status if s.metadata.name in ("app", "dbg")} == {status[0].sandbox_id}
    eph = node.container_state("dbg")
    assert "running" in eph["state"] and eph["ready"] is False and "started" not in eph
    assert eph["containerID"] == f"{node.syncer.container_id_scheme}{dbg}"
    events = [e for e in node.recorder.list("uid-1") if e["reason"] == "Started"]
    assert [e["involvedObject"].get("fieldPath") for e in events] == ["spec.containers{app}",
                                                                        "spec.ephemeralContainers{dbg}"]
    # not part of the pod's readiness or phase
    assert node.phase() == "Running" and len((node.statuses.get_pod_status("uid-1") or {})["containerStatuses"]) == 1
    started = node.metrics.registry.get_sample_value("kubelet_started_containers_total",
                                                     {"container_type": "ephemeral_container"})
    assert started == 1


async def test_an_exited_ephemeral_container_stays_exited_whatever_the_restart_policy(node: FakeNode) -> None:
    pod = with_debug(make_pod(restartPolicy="Always"))
    node.config.set_source_pods("file", [pod])
    await node.settle()
    node.runtime.exit_container(node.runtime.container_id("dbg", "uid-1"), 1)
    await node.advance(600, step=10)
    assert starts(node, "dbg") == 1
    state = node.container_state("dbg")["state"]
    assert state["terminated"]["exitCode"] == 1 and state["terminated"]["reason"] == "Error"
    assert node.phase() == "Running" and node.container_state("app")["restartCount"] == 0
    assert node.metrics.registry.get_sample_value("kubelet_terminated_containers_total", {
        "container_type": "ephemeral_container", "exit_code": "1", "reason": "Error"}) == 1


async def test_a_target_the_runtime_does_not_have_is_a_config_error(node: FakeNode) -> None:
    """The pod is still initializing (upstream starts ephemeral containers then too): app does not exist yet."""
    pod = make_pod(inits=[{"name": "init", "image": IMAGE}])
    node.config.set_source_pods("file", [with_debug(pod)])
    await node.settle()
    eph = node.container_state("dbg")
    assert eph["state"] == {"waiting": {"reason": "CreateContainerConfigError",
                                        "message": "unable to find target container app"}}
    assert ("Failed", "Error: unable to find target container app") in node.events()
    assert node.runtime.container_id("init", "uid-1")  # the init container runs on, untouched


async def test_an_image_that_cannot_be_pulled_backs_off_and_leaves_the_pod_alone(node: FakeNode) -> None:
    pod = make_pod()
    node.config.set_source_pods("file", [pod])
    await node.settle()
    node.runtime.fail_pull("example.invalid/nope:1")
    node.config.set_source_pods("file", [with_debug(pod, {**DEBUG, "image": "example.invalid/nope:1"})])
    await node.settle()
    assert node.container_state("dbg")["state"]["waiting"]["reason"] in ("ErrImagePull", "ImagePullBackOff")
    pulls = node.runtime.ops().count("pull_image")
    assert node.container_state("dbg")["state"]["waiting"]["reason"] == "ErrImagePull"
    node.workers.wake_all()  # a sync within the image backoff does not pull: it says so
    await node.settle()
    waiting = node.container_state("dbg")["state"]["waiting"]
    assert waiting["reason"] == "ImagePullBackOff"
    assert waiting["message"].startswith('Back-off pulling image "example.invalid/nope:1"')
    await node.advance(40)
    # retried when each backoff (10 s, then 20 s) expires: two more pulls
    assert node.runtime.ops().count("pull_image") == pulls + 2
    assert node.phase() == "Running" and node.container_state("app")["restartCount"] == 0
    assert "running" in node.container_state("app")["state"]


async def test_killed_with_the_pod_at_once_not_after_the_sidecars(node: FakeNode) -> None:
    pod = with_debug(make_pod(inits=[{"name": "side", "image": IMAGE, "restartPolicy": "Always"}]))
    node.config.set_source_pods("file", [pod])
    await node.settle()
    assert starts(node, "dbg") == 1 and starts(node, "side") == 1
    names = {node.runtime.container_id(n, "uid-1"): n for n in ("app", "dbg", "side")}
    node.config.set_source_pods("file", [])
    await node.settle()
    await node.advance(5)
    assert not [s for s in node.runtime.statuses() if s.state is ContainerState.RUNNING]
    stops = [call.args[0] for call in node.runtime.calls if call.op == "stop_container"]
    order = [names[cid] for cid in stops if cid in names]
    # upstream terminationOrdering: sidecars wait for the regular containers only; the ephemeral one stops at once
    assert order.index("dbg") < order.index("side") and order.index("app") < order.index("side")
