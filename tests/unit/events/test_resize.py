"""The resize events' messages against upstream's resize_test.go (TestPodResizeCompletedMsg, TestPodResizeStartedMsg,
TestPodResizeErrorMsg)."""

from __future__ import annotations

from typing import Any

from minikubelet.events.resize import resize_completed, resize_error, resize_pending, resize_started


def pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if inits:
        spec["initContainers"] = inits
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": spec}


def test_messages_carry_the_resources_and_the_generation() -> None:
    one = pod([{"name": "c0", "resources": {"requests": {"cpu": "100m", "memory": "100"},
                                            "limits": {"cpu": "0.1", "memory": "100"}}}])
    assert resize_completed(one, 1) == ('Pod resize completed: {"containers":[{"name":"c0","resources":{"limits":'
                                        '{"cpu":"100m","memory":"100"},"requests":{"cpu":"100m","memory":"100"}}}],'
                                        '"generation":1}')
    mixed = pod([{"name": "c1", "resources": {"limits": {"memory": "200"}, "requests": {"memory": "100"}}},
                 {"name": "c2", "resources": {"requests": {"cpu": "200m", "memory": "100"}}}],
                inits=[{"name": "c0", "resources": {"limits": {"cpu": "200m"}, "requests": {"cpu": "100m"}}}])
    assert resize_started(mixed, 2) == (
        'Pod resize started: {"initContainers":[{"name":"c0","resources":{"limits":{"cpu":"200m"},"requests":'
        '{"cpu":"100m"}}}],"containers":[{"name":"c1","resources":{"limits":{"memory":"200"},"requests":'
        '{"memory":"100"}}},{"name":"c2","resources":{"requests":{"cpu":"200m","memory":"100"}}}],"generation":2}')
    assert resize_completed(pod([{"name": "c0"}]), 3) == ('Pod resize completed: {"containers":[{"name":"c0",'
                                                         '"resources":{}}],"generation":3}')
    assert resize_error(one, 1, "some error occurred").endswith('"generation":1,"error":"some error occurred"}')
    assert resize_error(one, 1, "x").startswith("Pod resize error: {")
    assert resize_pending(one, "OutOfcpu", "no room", 4).startswith("Pod resize OutOfcpu: {")
