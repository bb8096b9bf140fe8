"""The agent's requests to the API server per minute, by kind, beside the real kubelet v1.36.2's.

The kubelet's figures come from two recordings (tests/fixtures/kubernetes/): `kubelet-call-summary.json` is the
total of every (verb, resource) it sent over one audit-logged session that had no fixed length and was busy
(pods created, crash-looping and deleted, kubelet restarts), so its totals are neither idle nor per minute;
`kubelet-flows/lease-create-renew.json` times the lease renewals of an idle kubelet. Like with like:

- idle, per minute: lease PUTs at the recorded renewal interval; node status PATCHes once per
  nodeStatusReportFrequency (5 min, the v1.36 default, when nothing changes: the flows' README); no pod status
  PATCHes and no events (the status manager and the recorder write only on change);
- busy session: the summary's totals over the minutes its lease renewals span (one PUT per renewal
  interval while the kubelet runs), an average over a session with pod churn, never an idle figure."""

from __future__ import annotations

import itertools
import statistics
from typing import Any

from tests.fixtures import load

# The kinds issue 19 asks for, in its order; everything else is "other".
LEASE = "lease PUT"
NODE_STATUS = "node status PATCH"
POD_STATUS = "pod status PATCH"
EVENTS = "events (POST+PATCH)"
READS = "GET/LIST/WATCH"
OTHER = "other"
CATEGORIES = (NODE_STATUS, LEASE, POD_STATUS, EVENTS, READS, OTHER)
NODE_STATUS_REPORT_MINUTES = 5.0  # nodeStatusReportFrequency, v1.36 default


def category(kind: str) -> str:
    """A bench request kind (`bench.cluster.request_kind`: `PATCH pods/status`, `PUT leases`, `WATCH pods`, ...)
    or an audit summary one (`patch pods status`, `update coordination.k8s.io leases`, ...) -> its category."""
    verb, *rest = kind.lower().replace("/", " ").split() or [""]
    rest = [w for w in rest if "." not in w]  # an API group (`coordination.k8s.io`) names no resource
    resource, sub = ([*rest, "", ""])[:2]
    if verb in ("get", "list", "watch"):
        return READS
    if resource == "leases" and verb in ("put", "update"):
        return LEASE
    if resource == "nodes" and sub == "status" and verb == "patch":
        return NODE_STATUS
    if resource == "pods" and sub == "status" and verb == "patch":
        return POD_STATUS
    if resource == "events" and verb in ("post", "create", "patch"):
        return EVENTS
    return OTHER


def by_category(kinds: dict[str, int]) -> dict[str, int]:
    """Counts by kind -> counts by category (every category present, 0 where none)."""
    out = dict.fromkeys(CATEGORIES, 0)
    for kind, n in kinds.items():
        out[category(kind)] += n
    return out


def per_minute(kinds: dict[str, int], minutes: float) -> dict[str, float]:
    """Counts by kind over `minutes` -> requests per minute by category."""
    if minutes <= 0:
        raise ValueError(f"a window of {minutes} minutes")
    return {c: n / minutes for c, n in by_category(kinds).items()}


def lease_interval(flow: list[dict[str, Any]]) -> float:
    """The mean seconds between consecutive lease renewals (PUT = audit verb `update`) in a recorded flow."""
    times = [float(e["t"]) for e in flow if e["verb"] == "update" and "/leases/" in e["requestURI"]]
    if len(times) < 2:
        raise ValueError("the flow has fewer than two lease renewals")
    return statistics.fmean(b - a for a, b in itertools.pairwise(times))


def idle_reference(interval: float) -> dict[str, float]:
    """The idle kubelet's requests per minute by category (its watches' re-opens left out: unrecorded)."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    out[LEASE] = 60.0 / interval
    out[NODE_STATUS] = 1.0 / NODE_STATUS_REPORT_MINUTES
    del out[READS], out[OTHER]
    return out


def session_reference(summary: dict[str, Any], interval: float) -> tuple[dict[str, float], float]:
    """The summary's node-user requests per minute by category over the minutes its lease renewals span."""
    node_users = ("node", f"system:node:{summary['node']}")  # the summary names the node's user "node"
    kinds = {kind: n for user, kind, n in summary["calls_by_verb_resource"] if user in node_users}
    renewals = sum(n for kind, n in kinds.items() if category(kind) == LEASE)
    if not renewals:
        raise ValueError("the summary has no lease renewals to time it by")
    minutes = renewals * interval / 60
    return per_minute(kinds, minutes), minutes


def kubelet_reference() -> dict[str, Any]:
    """Both of the kubelet's references, from the recordings in the checkout."""
    interval = lease_interval(load("kubelet-flows/lease-create-renew.json"))
    session, minutes = session_reference(load("kubelet-call-summary.json"), interval)
    return {"lease_interval_s": interval, "idle_per_min": idle_reference(interval),
            "session_per_min": session, "session_minutes": minutes}
