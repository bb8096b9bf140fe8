"""Pods through the API server and the API's faults: the events a seed mixes into its trace (with a random stream
of their own, so the node's events stay as `workload.generate` draws them), how they are applied, and the API's
invariants (`final-delete`, `api-converges`), checked after every step.

    api-create   an admin creates pod `a<n>` bound to the node (`a` draws its shape, as `create` does, and the
                 cpu/memory of its containers)
    api-delete   an admin deletes one (graceful: its own grace period)
    api-force    ... with gracePeriodSeconds 0 (the object is gone at once; the agent only sees it vanish)
    api-evict    ... through the Eviction API (DisruptionTarget, then the graceful delete)
    api-down     the API server refuses connections for `b` s (open watches are cut)
    api-hang     the API server answers nothing for `b` s (the client's timeouts fire)
    api-gone     the watch cache is compacted and the watches cut: the resume gets 410 Gone, the source relists
    api-conflict the next `b` pod status writes are answered 409 Conflict
    api-slow     watch events arrive `b` s late for the next 120 s
    api-update   an admin patches a live pod: `b` 0 a label (no sync), 1 its first container's image (the
                 container is restarted with it), 2 an activeDeadlineSeconds of 20 s (the pod fails with
                 DeadlineExceeded once it has run that long)
    api-resize   an admin resizes a live pod in place (PATCH pods/resize) with the cpu/memory it already names (so
                 its QoS class stays): `b` 0 smaller values (fits), 1 large ones (fits only on an emptier node, else
                 Deferred and retried), 2 more than the node has (Deferred: upstream 1.36 has no Infeasible for
                 that), 3 a smaller memory only (a container's resizePolicy, set at its creation, may say
                 RestartContainer for memory), 4 pod-level requests
                 (Infeasible on this node), 5 smaller values while the runtime refuses the next UpdateContainerResources
                 calls. Drawn from a stream of its own, so the other events of a seed stay as they were drawn.
    api-mirror   an admin deletes a mirror pod: `b` 0 graceful (its own grace period: the kubelet deletes it for
                 good and makes it again), 1 with gracePeriodSeconds 0 (gone at once; the kubelet makes it again)
    static-edit  a static pod's file changes (tests/sim/run.py): a new uid and config.hash under the same name, so
                 its mirror pod is stale. Both drawn from a stream of their own too.

Mirror pod invariants (`mirror-converges`, `mirror-not-run`): see `_check_mirrors`.
"""

from __future__ import annotations

import asyncio
import datetime
import random
from dataclasses import dataclass
from typing import Any

from cri.errors import RuntimeError_
from minikubelet.base import podview
from minikubelet.base.clock import FakeClock
from tests.sim.api import ADMIN, ApiAgent, SimApi
from tests.sim.invariants import DELETE_BOUND, Checker, Violation
from tests.sim.node import SimNode
from tests.sim.shapes import CPU_REQUESTS, MEMORY_REQUESTS
from tests.sim.workload import NAMES, NODE, Event, pod_for

Json = dict[str, Any]
FINAL_DELETE_BOUND = DELETE_BOUND + 30.0  # a deleted pod's worker is done within DELETE_BOUND; then the sync period
CONVERGE_BOUND = 120.0
LEASE_SETTLE = 20.0  # after the API is back (or the heartbeat starts) the lease is renewed within this
NODE_STATUS_SETTLE = 60.0  # ... and the Node registered and its status reported
NODE_STATUS_AGE = 1.5 * 300.0 + 30.0  # nodeStatusReportFrequency, jittered by up to half of it, + a bound
SLOW_FOR = 120.0
API_SHARE = 0.35  # the chance an API event comes before each of the node's events
WEIGHTS: dict[str, int] = {"api-create": 30, "api-delete": 16, "api-force": 5, "api-evict": 4, "api-down": 4,
                           "api-hang": 3, "api-gone": 4, "api-conflict": 5, "api-slow": 3, "api-update": 8}
_KINDS = list(WEIGHTS)
_CUM = [sum(list(WEIGHTS.values())[: i + 1]) for i in range(len(WEIGHTS))]
_B = {"api-down": (5, 30, 90), "api-hang": (5, 40), "api-conflict": (1, 3), "api-slow": (2, 10),
      "api-update": (0, 1, 2)}
UPDATED_IMAGE = "busybox:1.37"
RESIZE_SHARE = 0.3  # the chance an api-resize comes before each of the node's events
RESIZES = (0, 0, 1, 2, 3, 3, 4, 5)
SMALL = {"cpu": ("50m", "200m", "300m"), "memory": ("32Mi", "128Mi", "192Mi")}
LARGE = {"cpu": ("1500m",), "memory": ("1536Mi",)}
OVER = {"cpu": ("3",), "memory": ("3Gi",)}
MIRROR_SHARE = 0.1  # the chance an api-mirror or static-edit comes before each of the node's events
MIRROR_EVENTS = (("api-mirror", 0), ("api-mirror", 0), ("api-mirror", 1), ("static-edit", 0))
MIRROR_BOUND = CONVERGE_BOUND  # after the API is back (or the agent starts, or the static pod changes)
# written out here, not read from minikubelet.pod.mirror, so a change there is caught
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
HASH_ANNOTATION = "kubernetes.io/config.hash"


def mix(seed: int, events: list[Event]) -> list[Event]:
    """`events` with the seed's API events put in between."""
    rng = random.Random(seed * 7919 + 32)
    resizes = random.Random(seed * 7919 + 36)
    mirrors = random.Random(seed * 7919 + 40)
    out: list[Event] = []
    for ev in events:
        if mirrors.random() < MIRROR_SHARE:
            kind, b = mirrors.choice(MIRROR_EVENTS)
            out.append(Event(kind, mirrors.randrange(1 << 16), b, 0.0))
        if resizes.random() < RESIZE_SHARE:
            # no virtual time of its own (the next event's runs): most find no pod to resize, and the sim's cost is
            # per virtual second
            out.append(Event("api-resize", resizes.randrange(1 << 16), resizes.choice(RESIZES), 0.0))
        if rng.random() < API_SHARE:
            kind = rng.choices(_KINDS, cum_weights=_CUM)[0]
            b = rng.choice(_B.get(kind, (0,)))
            out.append(Event(kind, rng.randrange(1 << 16), b, rng.choice((0.0, 0.5, 2.0, 10.0))))
        out.append(ev)
    return out


def api_pod(n: int, shape: int) -> Json:
    """API pod number `n`: the shape `create` draws, bound to the node, without the file source's fields."""
    pod = pod_for(n, shape)
    md = pod["metadata"]
    spec = dict(pod["spec"])
    spec["containers"] = [_with_resources(c, random.Random(f"resources {shape} {i}"))
                          for i, c in enumerate(spec["containers"])]
    spec["nodeName"] = NODE
    spec["automountServiceAccountToken"] = False
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"a{n % NAMES}", "namespace": md["namespace"]},
            "spec": spec}


def _with_resources(container: Json, rng: random.Random) -> Json:
    """Most API containers request cpu and memory (so they can be resized), half of those with equal limits (some
    pods Guaranteed), some with resizePolicy RestartContainer for memory; a third have none (BestEffort pods, whose
    resize the API refuses: the QoS class would change)."""
    if rng.random() < 0.35 or (container.get("resources") or {}).get("requests"):
        return container
    requests = {"cpu": rng.choice(CPU_REQUESTS[2:]), "memory": rng.choice(MEMORY_REQUESTS[2:])}
    out = {**container, "resources": {"requests": requests, **({"limits": dict(requests)} if rng.random() < 0.5
                                                                else {})}}
    if rng.random() < 0.4:  # the resize subresource cannot change it: set at the creation, as a user would
        out["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                               {"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    return out


@dataclass
class _Deleted:
    at: float  # monotonic
    grace: float


class ApiWorld:
    """The API server of a run, the events on it, and its invariants."""

    def __init__(self, clock: FakeClock, seed: int, checker: Checker) -> None:
        self.clock = clock
        self.api = SimApi(clock, seed)
        self.checker = checker
        self.created = 0
        self.agent: ApiAgent | None = None
        self.agent_started = 0.0
        self.deleted: dict[str, _Deleted] = {}  # uid -> when it was deleted through the API, until it is gone
        self.differs: dict[str, float] = {}  # uid -> since when the API's status differs from the agent's
        self.lease_started: float | None = None  # monotonic: the agent's heartbeat loop began
        self.mirror_wrong: dict[tuple[str, str], float] = {}  # (what, full name) -> since when a mirror pod is wrong
        self.mirror_uids: set[str] = set()  # every mirror pod the API server has had

    def attach(self, node: SimNode, max_pods: int) -> None:
        """A (new) agent's API half on `node`."""
        def set_source_pods(source: str, pods: list[Any]) -> None:
            node.config.set_source_pods(source, pods)
            node.stop_orphans_once_sources_seen()

        agent = ApiAgent(self.api, self.clock, node.statuses, node.manager, node.workers, max_pods, set_source_pods)
        async def heartbeat() -> None:
            self.lease_started = self.clock.monotonic()
            await agent.lease.run()

        node.loops += [("node-status", agent.node_status.run), ("node-lister", agent.node_lister.run),
                       ("api-pods", agent.run_source),
                       ("pod-status-sync", agent.status_sync.run), ("node-lease", heartbeat),
                       ("mirror-pods", agent.mirrors.run)]
        node.sources_seen = lambda: agent.source.seen
        node.mirror_wake = agent.mirrors.wake
        self.agent = agent
        self.agent_started = self.clock.monotonic()
        self.lease_started = None
        self.differs.clear()
        self.mirror_wrong.clear()

    # -- events ----------------------------------------------------------------------------------------------
    def apply(self, ev: Event) -> None:
        api = self.api
        if ev.kind == "api-create":
            n = self.created
            self.created += 1
            api.admin("POST", "/api/v1/namespaces/default/pods", api_pod(n, ev.a))
        elif ev.kind in ("api-delete", "api-force", "api-evict") and (pods := self._live()):
            pod = pods[ev.a % len(pods)]
            self._delete(pod, ev.kind)
        elif ev.kind == "api-update" and (pods := self._live()):
            # most API pods of a run end Failed (rejected, preempted, crashed under Never): a live one is the point
            running = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            target = running or pods
            self._update(target[ev.a % len(target)], ev.b)
        elif ev.kind == "api-resize" and (resizable := self._resizable()):
            pod, i = resizable[ev.a % len(resizable)]
            self._resize(pod, i, ev.a, ev.b)
        elif ev.kind == "api-mirror" and (mirrors := self._mirrors()):
            mirror = mirrors[ev.a % len(mirrors)]
            md = mirror["metadata"]
            self.api.admin("DELETE", f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}",
                           {"gracePeriodSeconds": 0} if ev.b == 1 else None)
        elif ev.kind in ("api-down", "api-hang"):
            api.outage(float(ev.b), hang=ev.kind == "api-hang")
        elif ev.kind == "api-gone":
            api.gone()
        elif ev.kind == "api-conflict":
            api.conflicts += ev.b
        elif ev.kind == "api-slow":
            api.watch_delay = float(ev.b)
            asyncio.get_running_loop().call_later(SLOW_FOR, self._fast)

    def _fast(self) -> None:
        self.api.watch_delay = 0.0

    def _live(self) -> list[Json]:
        """The API pods not being deleted, mirror pods left out (the api-mirror event's)."""
        return [p for _uid, p in sorted(self.api.pods().items())
                if not p["metadata"].get("deletionTimestamp") and not is_mirror_pod(p)]

    def _mirrors(self) -> list[Json]:
        return [p for _uid, p in sorted(self.api.pods().items())
                if not p["metadata"].get("deletionTimestamp") and is_mirror_pod(p)]

    def _update(self, pod: Json, how: int) -> None:
        md = pod["metadata"]
        path = f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}"
        if how == 0:
            patch: Json = {"metadata": {"labels": {"updated": str(int(self.clock.monotonic()))}}}
        elif how == 1:
            first = pod["spec"]["containers"][0]["name"]
            patch = {"spec": {"containers": [{"name": first, "image": UPDATED_IMAGE}]}}
            if pod["spec"]["containers"][0].get("image") != UPDATED_IMAGE:
                self.checker.spec_changed(str(md["uid"]), first)
        else:
            patch = {"spec": {"activeDeadlineSeconds": 20}}
            self.checker.deadlines.add(str(md["uid"]))
        self.api.admin("PATCH", path, patch)

    def _resizable(self) -> list[tuple[Json, int]]:
        """(pod, container index) of each regular container with resources of a live pod not terminal; those the
        API shows running if there are any (a resize of a container that does not run is only recorded)."""
        out = [(p, i) for p in self._live() if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
               for i, c in enumerate(p["spec"]["containers"]) if (c.get("resources") or {}).get("requests")]
        running = [(p, i) for p, i in out if any(
            cs.get("name") == p["spec"]["containers"][i]["name"] and "running" in (cs.get("state") or {})
            for cs in (p.get("status") or {}).get("containerStatuses") or [])]
        return running or out

    def _resize(self, pod: Json, i: int, pick: int, how: int) -> None:
        md = pod["metadata"]
        c = pod["spec"]["containers"][i]
        path = f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}/resize"
        if how == 4:
            patch: Json = {"spec": {"resources": {"requests": {"cpu": "4", "memory": "4Gi"}}}}
        else:
            values = LARGE if how == 1 else OVER if how == 2 else SMALL
            res = c.get("resources") or {}
            new = {key: {r: values[r][(pick >> 3) % len(values[r])] for r in (res.get(key) or {})}
                   for key in ("requests", "limits") if res.get(key)}
            if how == 3:  # the memory only (RestartContainer, if the container's resizePolicy says so)
                new = {key: {r: q if r == "memory" else res[key][r] for r, q in rs.items()} for key, rs in new.items()}
            patch = {"spec": {"containers": [{"name": c["name"], "resources": new}]}}
            if how == 5:
                self.checker.runtime.fail("update_container_resources",
                                          RuntimeError_("injected update_container_resources failure"),
                                          times=1 + pick % 2)
        self.api.admin("PATCH", path, patch)

    def _delete(self, pod: Json, how: str) -> None:
        md = pod["metadata"]
        path = f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}"
        uid = str(md["uid"])
        grace = float(pod["spec"].get("terminationGracePeriodSeconds") or 0)
        if how == "api-evict":
            with self.api.deterministic():
                self.api.registry.evict(ADMIN, md["namespace"], md["name"], {})
        else:
            self.api.admin("DELETE", path, {"gracePeriodSeconds": 0} if how == "api-force" else None)
        self.deleted.setdefault(uid, _Deleted(self.clock.monotonic(), grace))
        self.checker.deleted(uid, grace)

    def quiesce(self) -> None:
        """Faults stop; every API pod is deleted."""
        self.api.conflicts = 0
        self.api.watch_delay = 0.0
        for pod in self._live():
            self._delete(pod, "api-delete")

    # -- invariants ------------------------------------------------------------------------------------------
    def check(self, node: SimNode) -> str:
        """`final-delete` and `api-converges`; returns the API's pods for the trace."""
        api = self.api
        now = self.clock.monotonic()
        stored = api.pods()
        if node.orphans_pending:
            # until the API source has listed since the agent's start, runtime pods no worker owns are not known to
            # be orphans (upstream HandlePodCleanups waits for sourcesReady): a deleted pod's leftovers wait too
            for pending in self.checker.deletions.values():
                pending.deadline = max(pending.deadline, now + DELETE_BOUND)
        reachable = api.reachable
        for uid, d in list(self.deleted.items()):
            if uid not in stored:
                del self.deleted[uid]
                continue
            # the agent learns of the deletion through the API: its worker's bound starts when the API is back
            if api.reachable_since > d.at and (dl := self.checker.deletions.get(uid)) is not None:
                dl.deadline = max(dl.deadline, api.reachable_since + d.grace + DELETE_BOUND)
            deadline = max(d.at + d.grace, api.reachable_since) + FINAL_DELETE_BOUND
            if reachable and now > deadline:
                left = stored[uid]
                raise Violation("final-delete", f"pod {left['metadata']['name']} ({uid}) deleted at {d.at:.1f} "
                                                f"(grace {d.grace:.0f} s) is still in the API at {now:.1f}: phase "
                                                f"{(left.get('status') or {}).get('phase')}")
        if reachable:
            since = max(api.reachable_since, self.agent_started)
            for entry in node.statuses.statuses():
                uid = podview.uid(entry.pod)
                pod = stored.get(uid)
                ours, theirs = summary(entry.status), summary((pod or {}).get("status") or {})
                if pod is None or ours == theirs:
                    self.differs.pop(uid, None)
                    continue
                first = self.differs.setdefault(uid, now)
                if now - max(first, since) > CONVERGE_BOUND:
                    raise Violation("api-converges", f"pod {uid}: the agent has {ours}, the API {theirs} since "
                                                     f"{max(first, since):.1f} (now {now:.1f})")
            self._check_lease(now)
            self._check_mirrors(node, stored, now, since)
        else:
            self.differs.clear()
            self.mirror_wrong.clear()
        self._check_mirrors_not_run(stored)
        # a mirror pod by its name and the config.hash it mirrors
        pods = str(sorted((_trace_name(p), (p.get("status") or {}).get("phase"),
                           bool(p["metadata"].get("deletionTimestamp"))) for p in stored.values()))
        return f"{pods} 410s={api.expired}"

    def _check_mirrors(self, node: SimNode, stored: dict[str, Json], now: float, since: float) -> None:
        """`mirror-converges` (upstream kubelet.go tryReconcileMirrorPods in SyncPod, HandlePodCleanups): once the API
        has been reachable for the bound, each static pod the agent runs (admitted, its worker syncing: upstream
        makes the mirror in SyncPod, so not for a pod refused or waiting behind an older one of its name) has a
        mirror pod not being deleted whose config.mirror is its config.hash, and no mirror pod is left of a name no
        static pod wanted or still stopping has."""
        mirrors = {podview.full_name(p): p for p in stored.values() if is_mirror_pod(p)}
        statics: dict[str, list[tuple[str, Json]]] = {}
        for uid, pod in [*node.manager.desired.items(), *zip(node.workers.uids(), node.workers.pods(), strict=True)]:
            if podview.is_static(pod) and uid not in (u for u, _p in statics.get(podview.full_name(pod), [])):
                statics.setdefault(podview.full_name(pod), []).append((uid, pod))
        wrong: dict[tuple[str, str], str] = {}
        for full, group in statics.items():
            syncing = [(uid, pod) for uid, pod in group if (w := node.workers.get(uid)) is not None
                       and not w.terminating and not node.manager.rejected(uid) and uid in node.manager.desired]
            if len(syncing) != 1:
                continue
            uid, pod = syncing[0]
            m = mirrors.get(full)
            if m is None or m["metadata"].get("deletionTimestamp") or \
                    _annotation(m, MIRROR_ANNOTATION) != _annotation(pod, HASH_ANNOTATION):
                shown = "none" if m is None else _trace_name(m) + (
                    " (being deleted)" if m["metadata"].get("deletionTimestamp") else "")
                wrong[("missing", full)] = f"static pod {full} ({uid}) runs, its mirror pod in the API: {shown}"
        for full, m in mirrors.items():
            if full not in statics:
                wrong[("orphan", full)] = f"mirror pod {full} ({podview.uid(m)}) is left of a static pod that is gone"
        self.mirror_wrong = {k: self.mirror_wrong.get(k, now) for k in wrong}
        for k, first in self.mirror_wrong.items():
            if now - max(first, since) > MIRROR_BOUND:
                raise Violation("mirror-converges", f"{wrong[k]} since {max(first, since):.1f} (now {now:.1f})")

    def _check_mirrors_not_run(self, stored: dict[str, Json]) -> None:
        """`mirror-not-run`: nothing of a mirror pod ever runs (the API source hands it to the mirror pods, never to
        the pod manager)."""
        self.mirror_uids.update(uid for uid, p in stored.items() if is_mirror_pod(p))
        for o in self.checker.runtime.objects():
            if o.pod.uid in self.mirror_uids:
                raise Violation("mirror-not-run", f"the runtime has {o.id} of mirror pod {o.pod.name} ({o.pod.uid})")

    def _check_lease(self, now: float) -> None:
        started = self.lease_started
        if started is None:
            return
        if now - max(started, self.api.reachable_since) > NODE_STATUS_SETTLE:
            self._check_node_status()
        if now - max(started, self.api.reachable_since) <= LEASE_SETTLE:
            return
        lease = self.api.store.get("leases", "kube-node-lease", NODE)
        spec = (lease or {}).get("spec") or {}
        renewed = _seconds(str(spec.get("renewTime") or ""))
        duration = float(spec.get("leaseDurationSeconds") or 0)
        if renewed is None or self.clock.now() - renewed > duration:
            raise Violation("lease-fresh", f"the node's lease was renewed at {spec.get('renewTime')} "
                                           f"(duration {duration:.0f} s), the API has been reachable since "
                                           f"{self.api.reachable_since:.1f}, now {now:.1f}")

    def _check_node_status(self) -> None:
        node = self.api.store.get("nodes", "", NODE)
        ready = next((c for c in ((node or {}).get("status") or {}).get("conditions") or []
                      if c.get("type") == "Ready"), None)
        beat = _seconds(str((ready or {}).get("lastHeartbeatTime") or ""), "%Y-%m-%dT%H:%M:%SZ")
        if beat is None or self.clock.now() - beat > NODE_STATUS_AGE:
            raise Violation("node-status-fresh", f"the Node's Ready condition: {ready} (node registered: "
                                                 f"{node is not None}), at {self.clock.monotonic():.1f}")

    def check_clean(self) -> None:
        left = [p["metadata"]["name"] for p in self.api.pods().values()]
        if left:
            raise Violation("final-delete", f"pods left in the API after quiescence: {left}")


def _annotation(pod: Json, key: str) -> Any:
    return (pod["metadata"].get("annotations") or {}).get(key)


def is_mirror_pod(pod: Json) -> bool:
    return bool(_annotation(pod, MIRROR_ANNOTATION))


def _trace_name(pod: Json) -> str:
    mirrored = _annotation(pod, MIRROR_ANNOTATION)
    return f"{pod['metadata']['name']}<{mirrored}>" if mirrored else str(pod["metadata"]["name"])


def _seconds(text: str, fmt: str = "%Y-%m-%dT%H:%M:%S.%fZ") -> float | None:
    try:
        return datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.UTC).timestamp()
    except ValueError:
        return None


def summary(status: Json) -> tuple[Any, ...]:
    """What `api-converges` compares: the phase, and each container's state and restart count."""
    containers = []
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        containers.append((str(cs.get("name")), next(iter(sorted(k for k, v in state.items() if v is not None)), ""),
                           int(cs.get("restartCount") or 0)))
    return status.get("phase"), tuple(sorted(containers))
