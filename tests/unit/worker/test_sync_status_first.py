"""Upstream SyncPod sets the pod's status from what it observed before it acts on the runtime: a container's exit
shows before the finished pod's sandbox is stopped (the stop is the termination's, not SyncPod's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minikubelet.base.podview import Pod
from tests.unit.fake_node import FakeNode, make_pod


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
