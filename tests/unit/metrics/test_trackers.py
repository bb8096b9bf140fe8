"""The pod start SLI and node start-up trackers on an injected clock, the graceful shutdown record, and the
request families of the kubelet's two HTTP servers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.base.kubetime import rfc3339
from minikubelet.metrics import Metrics
from minikubelet.nodeshutdown.state import STATE_FILE, ShutdownState
from minikubelet.server.request_metrics import InstrumentedRoutes, request_labels
from minikubelet.server.routes import Headers, Query, Request, Response, Routes
from tests.unit.metrics.scrape import scrape, value

T0 = 1_700_000_000.0


def pod(uid: str = "u1", *, running: bool = False, start_time: bool = False, volumes: list[Any] | None = None,
        host_network: bool = False, phase: str = "Pending", unschedulable: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if start_time:
        status["startTime"] = rfc3339(T0)
    if running:
        status["containerStatuses"] = [{"name": "app", "state": {"running": {"startedAt": rfc3339(T0 + 5)}}}]
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    return {"metadata": {"uid": uid, "creationTimestamp": rfc3339(T0)},
            "spec": {"volumes": volumes or [], "hostNetwork": host_network}, "status": status}


def test_the_start_sli_is_creation_to_watch_observed_running_less_pulls_and_init_containers() -> None:
    clock = FakeClock(T0)
    m = Metrics(now=clock.now)
    tracker = m.pod_startup
    tracker.observed_on_watch(pod())  # new, not started: tracked
    clock.advance(1)
    tracker.image_pull_started("u1")
    clock.advance(3)
    tracker.image_pull_finished("u1")
    tracker.init_container_started("u1", clock.now())
    tracker.init_container_finished("u1", clock.now() + 2)
    clock.advance(4)
    tracker.observed_on_watch(pod(running=True, start_time=True), clock.now())  # before our write: not yet
    assert "kubelet_pod_start_total_duration_seconds" not in scrape(m.registry)
    tracker.status_written(pod(running=True, start_time=True))
    clock.advance(1)
    tracker.observed_on_watch(pod(running=True, start_time=True, phase="Running"), clock.now())
    assert value(m.registry, "kubelet_pod_start_total_duration_seconds_sum") == 9.0
    assert value(m.registry, "kubelet_pod_start_sli_duration_seconds_sum") == 9.0 - 3 - 2
    assert value(m.registry, "kubelet_first_network_pod_start_sli_duration_seconds") == 4.0
    # observed once
    tracker.observed_on_watch(pod(running=True, start_time=True, phase="Running"), clock.now() + 5)
    assert value(m.registry, "kubelet_pod_start_total_duration_seconds_count") == 1


def test_stateful_started_unschedulable_pods_and_pods_seen_started_are_left_out() -> None:
    clock = FakeClock(T0)
    m = Metrics(now=clock.now)
    t = m.pod_startup
    t.observed_on_watch(pod("stateful", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]))
    t.observed_on_watch(pod("late", start_time=True))  # first seen already started (an agent restart)
    t.observed_on_watch(pod("unsched", unschedulable=True))
    t.observed_on_watch(pod("host", host_network=True))
    for uid in ("stateful", "late", "unsched", "host"):
        p = pod(uid, running=True, start_time=True)
        p["spec"] = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]} \
            if uid == "stateful" else {"hostNetwork": uid == "host"}
        t.status_written(p)
        t.observed_on_watch(p, T0 + 10)
    assert value(m.registry, "kubelet_pod_start_total_duration_seconds_count") == 2  # stateful and host
    assert value(m.registry, "kubelet_pod_start_sli_duration_seconds_count") == 1  # host only
    # the first pod on the pod network has not started yet
    assert value(m.registry, "kubelet_first_network_pod_start_sli_duration_seconds") == 0.0


def test_node_startup_durations_follow_registration_and_the_first_ready() -> None:
    clock = FakeClock(T0)
    m = Metrics(now=clock.now)
    m.node_startup_latency = type(m.node_startup_latency)(m, clock.now, boot=T0 - 60)
    tracker = m.node_startup_latency
    tracker.node_ready()  # before registration: nothing
    clock.advance(2)
    tracker.attempt_register()
    clock.advance(3)
    tracker.attempt_register()  # the first attempt counts
    tracker.registered_new_node()
    clock.advance(4)
    tracker.node_ready()
    clock.advance(10)
    tracker.node_ready()
    r = m.registry
    assert value(r, "kubelet_node_startup_pre_kubelet_duration_seconds") == 60
    assert value(r, "kubelet_node_startup_pre_registration_duration_seconds") == 2
    assert value(r, "kubelet_node_startup_registration_duration_seconds") == 3
    assert value(r, "kubelet_node_startup_post_registration_duration_seconds") == 4
    assert value(r, "kubelet_node_startup_duration_seconds") == 69


def test_the_graceful_shutdown_record_survives_the_reboot(tmp_path: Path) -> None:
    m = Metrics()
    state = ShutdownState(str(tmp_path), m)
    state.started(T0)
    assert value(m.registry, "kubelet_graceful_shutdown_start_time_seconds") == T0
    assert value(m.registry, "kubelet_graceful_shutdown_end_time_seconds") == 0
    state.ended(T0, T0 + 25.5)
    assert json.loads((tmp_path / STATE_FILE).read_text()) == {
        "startTime": "2023-11-14T22:13:20Z", "endTime": "2023-11-14T22:13:45.500000Z"}
    after_boot = Metrics()
    ShutdownState(str(tmp_path), after_boot).restore()
    assert value(after_boot.registry, "kubelet_graceful_shutdown_start_time_seconds") == T0
    assert value(after_boot.registry, "kubelet_graceful_shutdown_end_time_seconds") == T0 + 25


def test_an_unreadable_shutdown_record_is_logged_not_fatal(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("{not json")
    m = Metrics()
    ShutdownState(str(tmp_path), m).restore()
    assert value(m.registry, "kubelet_graceful_shutdown_start_time_seconds") == 0


@pytest.mark.parametrize(("method", "path", "server", "labels"), [
    ("GET", "/pods/", "readonly", ("GET", "pods", "readonly", "false")),
    ("GET", "/metrics/cadvisor", "readonly", ("GET", "metrics", "readonly", "false")),
    ("GET", "/stats/summary", "readwrite", ("GET", "stats", "readwrite", "false")),
    ("POST", "/exec/ns/p/c", "readwrite", ("POST", "exec", "readwrite", "true")),
    ("POST", "/exec/ns/p/c", "readonly", ("POST", "other", "readonly", "false")),
    ("GET", "/portForward/ns/p", "readwrite", ("GET", "portForward", "readwrite", "false")),
    ("GET", "/nothing", "readwrite", ("GET", "other", "readwrite", "false")),
    ("BREW", "/pods", "readonly", ("other", "pods", "readonly", "false")),
])
def test_request_labels_are_the_kubelets(method: str, path: str, server: str, labels: tuple[str, ...]) -> None:
    assert request_labels(method, path, server) == labels


async def test_the_read_only_routes_count_every_request_and_hold_it_in_flight() -> None:
    m = Metrics()
    inflight: list[float | None] = []

    async def pods(_r: Request) -> Response:
        inflight.append(value(m.registry, "kubelet_http_inflight_requests", method="GET", path="pods",
                              server_type="readonly", long_running="false"))
        return Response.text("[]")

    routes = Routes()
    routes.get("/pods", pods)
    served = InstrumentedRoutes(routes, m.http, "readonly")
    for path in ("/pods", "/pods", "/missing"):
        await served.dispatch(Request("GET", path, Query(), Headers(), b""))
    assert inflight == [1.0, 1.0]
    labels = {"method": "GET", "path": "pods", "server_type": "readonly", "long_running": "false"}
    assert value(m.registry, "kubelet_http_requests_total", **labels) == 2
    assert value(m.registry, "kubelet_http_inflight_requests", **labels) == 0
    assert value(m.registry, "kubelet_http_requests_duration_seconds_count", **labels) == 2
    assert value(m.registry, "kubelet_http_requests_total", method="GET", path="other", server_type="readonly",
                 long_running="false") == 1


async def test_a_sleep_hook_cut_short_is_counted_one_that_ran_out_is_not() -> None:
    import asyncio
    from typing import cast

    from cri.runtime import Runtime
    from minikubelet.base.podview import ContainerView
    from minikubelet.worker.hooks import run_hook

    clock = FakeClock(T0)
    m = Metrics()
    c = ContainerView.of({"name": "app", "image": "busybox"})

    def hook() -> asyncio.Task[None]:
        return asyncio.ensure_future(run_hook({"sleep": {"seconds": 5}}, runtime=cast(Runtime, None), clock=clock,
                                              container_id="c1", container=c, pod_ip="", pod_desc="ns/p",
                                              sleep_cut=m.sleep_action_terminated_early.inc))

    done = hook()
    await asyncio.sleep(0)
    clock.advance(5)
    await done
    cut = hook()
    await asyncio.sleep(0)
    cut.cancel()
    await asyncio.gather(cut, return_exceptions=True)
    assert value(m.registry, "kubelet_sleep_action_terminated_early_total") == 1
