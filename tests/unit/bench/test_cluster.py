"""The cluster benches' bookkeeping: Ready as the API shows it, per-pod latencies from watch events, and the
agent's requests sorted by kind and rate."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.cluster import (
    ReadyTimes,
    TimedRequests,
    agent_counts,
    counts_delta,
    is_ready,
    peak_rate,
    request_kind,
    tally,
)
from minikubelet.metrics import Metrics
from minikubelet.metrics_text import render
from tests.fixtures import load

Json = dict[str, Any]


def _pod(name: str) -> Json:
    pod: Json = copy.deepcopy(load("pod-real-kubelet-rich-running.json")["response"]["body"])
    pod["metadata"]["name"] = name
    return pod


def test_ready_is_running_with_the_ready_condition_true_as_a_real_kubelet_reports_it() -> None:
    assert is_ready(load("pod-real-kubelet-rich-running.json")["response"]["body"])
    # Running but not Ready (crash loop), Pending (init image pull failing): not ready
    assert not is_ready(load("pod-real-kubelet-crashloopbackoff.json")["response"]["body"])
    assert not is_ready(load("pod-real-kubelet-init-errimagepull.json")["response"]["body"])
    assert not is_ready({"metadata": {"name": "new"}})


def test_ready_needs_the_running_phase_too() -> None:
    pod = _pod("p")
    pod["status"]["phase"] = "Succeeded"
    assert not is_ready(pod)


def test_latency_from_the_recorded_watch_is_added_to_first_ready() -> None:
    events = load("watch-pods-node.json")["response"]["events"]
    tracker = ReadyTimes()
    for t, event in enumerate(events):
        tracker.observe(event, float(t) * 0.5)
    # ADDED (Pending) at 0.0, first MODIFIED with Ready True at 0.5; later MODIFIEDs change nothing
    assert tracker.latencies() == {"watch-demo": 0.5}
    assert tracker.all_ready({"watch-demo"})
    assert tracker.resource_version == "289"  # the bookmarks' resourceVersion, to resume from


def test_a_pod_first_seen_by_a_modified_event_counts_from_then_and_deleted_ones_are_not_ready() -> None:
    tracker = ReadyTimes()
    pending = _pod("a")
    pending["status"] = {"phase": "Pending"}
    tracker.observe({"type": "MODIFIED", "object": pending}, 10.0)
    tracker.observe({"type": "DELETED", "object": _pod("b")}, 10.5)
    tracker.observe({"type": "MODIFIED", "object": _pod("a")}, 12.25)
    assert tracker.latencies() == {"a": 2.25}
    assert not tracker.all_ready({"a", "b"})


def test_request_kinds_name_the_resource_and_subresource() -> None:
    assert request_kind("PATCH", "/api/v1/namespaces/default/pods/c1/status") == "PATCH pods/status"
    assert request_kind("GET", "/api/v1/namespaces/default/pods/c1") == "GET pods"
    assert request_kind("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn&limit=500") == "GET pods"
    assert request_kind("GET", "/api/v1/pods?allowWatchBookmarks=true&watch=true") == "WATCH pods"
    assert request_kind("GET", "/api/v1/pods?watch=1") == "WATCH pods"
    assert request_kind("GET", "/api/v1/pods?watchers=1") == "GET pods"
    assert request_kind("POST", "/api/v1/namespaces/default/events") == "POST events"
    assert request_kind("PATCH", "/api/v1/nodes/mkl-1/status") == "PATCH nodes/status"
    assert request_kind("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/mkl-1") == "PUT leases"
    assert request_kind("GET", "/api/v1/namespaces/default") == "GET namespaces"
    assert request_kind("GET", "/version") == "GET /version"


def test_tally_counts_one_user_most_frequent_first() -> None:
    reqs = [("system:node:n", "PATCH", "/api/v1/namespaces/default/pods/a/status"),
            ("system:node:n", "GET", "/api/v1/namespaces/default/pods/a"),
            ("system:node:n", "PATCH", "/api/v1/namespaces/default/pods/b/status"),
            ("kubernetes-admin", "POST", "/api/v1/namespaces/default/pods")]
    counts = tally(reqs, "system:node:n")
    assert counts == {"PATCH pods/status": 2, "GET pods": 1}
    assert next(iter(counts)) == "PATCH pods/status"


@pytest.mark.parametrize(("times", "peak"), [
    ([], 0),
    ([5.0], 1),
    ([0.0, 0.5, 1.0, 1.01, 3.0], 3),  # 0.0..1.0 is one second wide (inclusive), and so is 0.5..1.01
    ([3.0, 0.0, 0.1, 2.9, 2.95], 3),  # unsorted input
])
def test_peak_rate_is_the_most_requests_in_any_one_second(times: list[float], peak: int) -> None:
    assert peak_rate(times) == peak


def test_timed_requests_keep_the_arrival_time_of_each_request() -> None:
    log = TimedRequests()
    log.append(("u", "GET", "/a"))
    log.append(("v", "GET", "/b"))
    log.append(("u", "PUT", "/c"))
    assert len(log) == 3 and log[2] == ("u", "PUT", "/c")
    rows, times = log.since(log.times[1], "u")
    assert rows == [("u", "PUT", "/c")] and times == [log.times[2]]
    assert log.times == sorted(log.times)


def test_agent_counts_read_the_agents_own_metrics_exposition() -> None:
    m = Metrics()
    for _ in range(3):
        m.pod_worker_duration.labels("sync").observe(0.01)
    m.pod_worker_duration.labels("kill").observe(1.0)
    m.runtime_operations.labels("list_podsandbox").inc(7)
    m.runtime_operations.labels("create_container").inc()
    counts = agent_counts(render(m.registry).decode())
    assert counts == {"pod worker sync": 3.0, "pod worker kill": 1.0, "runtime list_podsandbox": 7.0,
                      "runtime create_container": 1.0}


def test_counts_delta_keeps_what_moved_most_first() -> None:
    before = {"pod worker sync": 3.0, "runtime list_podsandbox": 7.0, "runtime version": 1.0}
    after = {"pod worker sync": 13.0, "runtime list_podsandbox": 37.0, "runtime version": 1.0,
             "runtime create_container": 10.0}
    assert list(counts_delta(before, after).items()) == [
        ("runtime list_podsandbox", 30), ("pod worker sync", 10), ("runtime create_container", 10)]
