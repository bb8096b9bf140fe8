"""activeDeadlineSeconds after an agent restart (upstream updateStatusInternal's StartTime, pastActiveDeadline),
on the fake runtime and the fake clock."""

from __future__ import annotations

from pathlib import Path

from minikubelet.base.kubetime import parse_time, rfc3339
from tests.unit.fake_node import FakeNode, make_pod


async def test_pastActiveDeadline_counts_from_the_api_start_time_after_a_restart(tmp_path: Path) -> None:
    """The pod ran for 40 s under an earlier agent: its API startTime stays, and a 60 s deadline ends 20 s later."""
    node = FakeNode(tmp_path)
    try:
        pod = make_pod(activeDeadlineSeconds=60, restartPolicy="Never")
        pod["metadata"]["annotations"]["kubernetes.io/config.source"] = "api"
        started = rfc3339(node.clock.now() - 40)
        pod["status"] = {"phase": "Running", "startTime": started}
        node.config.set_source_pods("api", [pod])
        await node.settle()
        status = node.statuses.get_pod_status("uid-1")
        assert status is not None and status["phase"] == "Running" and status["startTime"] == started
        await node.advance(21)
        status = node.statuses.get_pod_status("uid-1")
        assert status is not None and (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded")
        assert status["startTime"] == started
        assert node.runtime.running() == []
    finally:
        await node.close()


def test_a_start_time_the_agent_cannot_read_is_no_deadline() -> None:
    assert parse_time("2026-11-28T15:00:00Z") == parse_time("2026-11-28T15:00:00.000+00:00") == 1795878000.0
    assert parse_time("yesterday") is None and parse_time(42) is None and parse_time("") is None
