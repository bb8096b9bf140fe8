"""The node shutdown service's kill through the pod workers (minikubelet/services/node_shutdown.py)."""

from __future__ import annotations

from pathlib import Path

from minikubelet.services.node_shutdown import shutdown_kill
from tests.unit.fake_node import make_pod, running_node


async def test_a_pod_removed_since_the_shutdown_listed_it_is_not_brought_back(tmp_path: Path) -> None:
    """The shutdown lists its pods when it begins and kills them group by group: a pod whose worker finished
    meanwhile (removed from its source) is done at once, and gets no new worker writing a status for it."""
    async with running_node(tmp_path) as node:
        pod = make_pod(uid="gone")
        node.config.set_source_pods("file", [pod])
        await node.settle()
        assert node.phase("gone") == "Running"
        node.config.set_source_pods("file", [])
        await node.advance(3)
        assert node.finished == ["gone"] and node.statuses.get_pod_status("gone") is None
        done = shutdown_kill(node.workers)(pod, 10, lambda _s: None)
        await node.settle()
        assert done.is_set()
        assert "gone" not in node.workers and node.statuses.get_pod_status("gone") is None


async def test_a_running_pod_is_killed_and_its_event_set_once_stopped(tmp_path: Path) -> None:
    async with running_node(tmp_path) as node:
        pod = make_pod(uid="up")
        node.config.set_source_pods("file", [pod])
        await node.settle()
        done = shutdown_kill(node.workers)(pod, 10, lambda status: status.update(phase="Failed", reason="Terminated"))
        await node.advance(2)
        assert done.is_set() and node.phase("up") == "Failed"
