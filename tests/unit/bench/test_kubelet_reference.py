"""Requests/min by kind, ours and the real kubelet's, from the recordings."""

from __future__ import annotations

import pytest

from bench.cluster import request_kind, tally
from bench.kubelet_reference import (
    CATEGORIES,
    EVENTS,
    LEASE,
    NODE_STATUS,
    OTHER,
    POD_STATUS,
    READS,
    by_category,
    category,
    idle_reference,
    kubelet_reference,
    lease_interval,
    per_minute,
    session_reference,
)
from tests.fixtures import load


def test_the_benches_kinds_and_the_audit_summarys_fall_in_the_same_categories() -> None:
    pairs = [("PATCH", "/api/v1/nodes/n/status", "patch nodes status", NODE_STATUS),
             ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n",
              "update coordination.k8s.io leases", LEASE),
             ("PATCH", "/api/v1/namespaces/default/pods/p/status", "patch pods status", POD_STATUS),
             ("POST", "/api/v1/namespaces/default/events", "create events", EVENTS),
             ("PATCH", "/api/v1/namespaces/default/events/e.1", "patch events", EVENTS),
             ("GET", "/api/v1/pods?watch=true", "watch pods", READS),
             ("GET", "/api/v1/nodes/n", "get nodes", READS),
             ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
              "create coordination.k8s.io leases", OTHER),
             ("DELETE", "/api/v1/namespaces/default/pods/p", "delete pods", OTHER)]
    for method, path, audit, want in pairs:
        assert category(request_kind(method, path)) == want, (method, path)
        assert category(audit) == want, audit
    assert category("") == OTHER
    assert category("PATCH pods") == OTHER  # a pod's own PATCH is not its status


def test_per_minute_sums_kinds_into_every_category() -> None:
    kinds = {"PUT leases": 12, "PATCH nodes/status": 1, "GET pods": 3, "WATCH pods": 1, "POST pods/eviction": 2}
    assert by_category(kinds) == {NODE_STATUS: 1, LEASE: 12, POD_STATUS: 0, EVENTS: 0, READS: 4, OTHER: 2}
    assert per_minute(kinds, 2.0) == {NODE_STATUS: 0.5, LEASE: 6.0, POD_STATUS: 0.0, EVENTS: 0.0, READS: 2.0,
                                      OTHER: 1.0}
    assert list(per_minute({}, 1.0)) == list(CATEGORIES)
    with pytest.raises(ValueError):
        per_minute(kinds, 0.0)


def test_tally_then_per_minute_counts_only_the_agents_requests() -> None:
    reqs = [("system:node:n", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n")] * 3
    reqs += [("kubernetes-admin", "PATCH", "/api/v1/nodes/n/status")]
    assert per_minute(tally(reqs, "system:node:n"), 0.5)[LEASE] == 6.0
    assert per_minute(tally(reqs, "system:node:n"), 0.5)[NODE_STATUS] == 0.0


def test_the_recorded_kubelet_renews_its_lease_every_ten_seconds() -> None:
    flow = load("kubelet-flows/lease-create-renew.json")
    # the three PUTs at 22.260, 32.275, 42.319 s; the GETs and the POST before them are not renewals
    assert lease_interval(flow) == pytest.approx((42.319 - 22.260) / 2)
    with pytest.raises(ValueError):
        lease_interval(flow[:4])


def test_idle_reference_is_the_lease_and_a_node_status_every_five_minutes_and_nothing_per_pod() -> None:
    assert idle_reference(10.0) == {NODE_STATUS: 0.2, LEASE: 6.0, POD_STATUS: 0.0, EVENTS: 0.0}


def test_the_session_summary_is_timed_by_its_lease_renewals() -> None:
    summary = {"node": "vm", "calls_by_verb_resource": [
        ["node", "update coordination.k8s.io leases", 60], ["node", "patch pods status", 30],
        ["system:node:vm", "create events", 10], ["system:bootstrap:x", "create certificates.k8s.io "
                                                  "certificatesigningrequests", 5]]}
    rates, minutes = session_reference(summary, 10.0)
    assert minutes == 10.0  # 60 renewals, one per 10 s
    assert rates[LEASE] == 6.0 and rates[POD_STATUS] == 3.0 and rates[EVENTS] == 1.0
    assert rates[OTHER] == 0.0  # the bootstrap user is not the node
    with pytest.raises(ValueError):
        session_reference({"node": "vm", "calls_by_verb_resource": []}, 10.0)


def test_the_recorded_kubelets_reference_figures() -> None:
    ref = kubelet_reference()
    assert ref["lease_interval_s"] == pytest.approx(10.03, abs=0.01)
    assert ref["idle_per_min"][LEASE] == pytest.approx(5.98, abs=0.01)
    # 87 renewals of ~10.03 s: a session of ~14.5 min with 305 pod status PATCHes, 268 + 64 events, 18 node status
    assert ref["session_minutes"] == pytest.approx(87 * 10.0295 / 60)
    assert ref["session_per_min"][POD_STATUS] == pytest.approx(305 / ref["session_minutes"])
    assert ref["session_per_min"][EVENTS] == pytest.approx(332 / ref["session_minutes"])
    assert ref["session_per_min"][NODE_STATUS] == pytest.approx(18 / ref["session_minutes"])
