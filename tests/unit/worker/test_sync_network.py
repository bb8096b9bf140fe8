"""Upstream SyncPod's network gate: while the runtime network is not ready only host-network pods start."""

from __future__ import annotations

from pathlib import Path

from minikubelet.network.pod_network import NO_POD_CIDR, NOT_READY
from tests.unit.fake_node import FakeNode, make_pod


async def test_pods_wait_for_the_network_and_host_network_pods_do_not(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    errors: tuple[str, ...] = (NOT_READY + NO_POD_CIDR,)
    node.syncer.network_errors = lambda: errors
    try:
        node.config.set_source_pods("api", [make_pod("web", "uid-1"), make_pod("ds", "uid-2", hostNetwork=True)])
        await node.settle()
        assert node.phase("uid-2") == "Running"  # a DaemonSet-style hostNetwork pod starts at once
        assert node.phase("uid-1") == "Pending"
        assert await node.runtime.list_pod_sandboxes({"io.kubernetes.pod.uid": "uid-1"}) == []
        assert node.events("uid-1") == [("NetworkNotReady", f"network is not ready: {NOT_READY}{NO_POD_CIDR}")]
        errors = ()
        node.workers.wake_all()  # what the pod network's on_ready does
        await node.settle()
        assert node.phase("uid-1") == "Running"
    finally:
        await node.close()
