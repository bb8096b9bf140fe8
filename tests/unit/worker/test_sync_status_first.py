"""Upstream SyncPod sets the pod's status from what it observed before it acts on the runtime: a container's exit
shows before the finished pod's sandbox is stopped (the stop is the termination's, not SyncPod's); a first start
takes its state from the runtime's answers, not from relists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cri.errors import StartContainerError
from minikubelet.base.podview import Pod
from tests.unit.fake_node import IMAGE, FakeNode, make_pod


async def test_an_exit_is_published_before_the_sandbox_is_stopped(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    seen: list[tuple[str, bool]] = []  # (phase, had a sandbox been stopped yet) at each status change

    def record(_pod: Pod, status: dict[str, Any] | None) -> None:
        if status is not None:
            seen.append((str(status.get("phase")), "stop_pod_sandbox" in node.runtime.ops()))

    node.statuses.add_listener(record)
    try:
        node.config.set_source_pods("file", [make_pod("once", "uid-1", restartPolicy="Never")])
        await node.settle()
        assert node.phase("uid-1") == "Running"
        node.runtime.exit_container(node.runtime.container_id("app", "uid-1"), 3)
        await node.settle()
        assert node.phase("uid-1") == "Failed"
        assert node.container_state("app", "uid-1")["state"]["terminated"]["exitCode"] == 3
        first_failed = next(stopped for phase, stopped in seen if phase == "Failed")
        assert first_failed is False
        # the termination still stops the sandbox, once
        assert node.runtime.ops().count("stop_pod_sandbox") >= 1
    finally:
        await node.close()


async def test_a_first_start_takes_the_state_from_the_runtimes_answers_not_a_relist(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    try:
        node.config.set_source_pods("file", [make_pod("web", "uid-1", [{"name": "a", "image": IMAGE}, {"name": "b", "image": IMAGE}])])
        await node.settle()
        assert node.phase("uid-1") == "Running"
        ops = node.runtime.ops()
        first = ops[ops.index("run_pod_sandbox"):len(ops) - ops[::-1].index("start_container")]
        assert first.count("start_container") == 2
        assert "pod_sandbox_status" in first
        assert not [op for op in first if op.startswith("list_")]
        # the state built from the answers is the one a relist shows: the next sync publishes nothing new
        before = node.statuses.get_pod_status("uid-1")
        node.workers.wake_all()
        await node.settle()
        assert node.statuses.get_pod_status("uid-1") == before
    finally:
        await node.close()


async def test_a_start_that_fails_falls_back_to_a_relist(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    node.runtime.fail("start_container", StartContainerError("exec: no such file"))
    try:
        node.config.set_source_pods("file", [make_pod("web", "uid-1", restartPolicy="Never")])
        await node.settle()
        ops = node.runtime.ops()
        after_start = ops[ops.index("start_container"):]
        assert after_start[1:3] in (["list_pod_sandboxes", "list_containers"], ["list_containers", "list_pod_sandboxes"])
        assert node.container_state("app", "uid-1")["state"] != {}
        assert ("Failed", "Error: exec: no such file") in node.events("uid-1")
    finally:
        await node.close()
