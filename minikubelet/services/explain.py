"""`explain`: the document that says why a pod on this node is in its state (docs/explain.md).

Assembled on request from what the deciders recorded (`explain.record`: admission, each sync's decision, the
kill, the eviction ranking) and from what the node shows now: the status it generated, the probes' last runs,
the resources the runtime reports and the kernel's pod cgroup files, the eviction signals, the pod's events.
Bounded: at most `MAX_EVENTS` events, messages and outputs cut, one entry per container and probe."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from cgroups.driver import ResourceConfig
from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.types import LABEL_POD_UID, ContainerState, LinuxResources
from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import ContainerView, Pod, PodView
from minikubelet.base.quantity import parse_quantity
from minikubelet.events import EventRecorder
from minikubelet.eviction.manager import EvictionManager
from minikubelet.eviction.thresholds import format_amount
from minikubelet.explain.record import MAX_CONTAINERS, ContainerDecision, ExplainStore, PodRecord, cut
from minikubelet.pod.manager import PodManager
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.runtime.state import name_of
from minikubelet.server.app import KubeletServer
from minikubelet.services.eviction import EvictionService
from minikubelet.status.manager import StatusManager
from minikubelet.worker.backoff import Backoff
from minikubelet.worker.dependencies import CgroupSource, ProbeSource
from minikubelet.worker.explain_record import SyncExplainer
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.probe_results import ManagerProbeSource
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorkers
from probes.manager import ProbeManager
from probes.result import ProbeKind

if TYPE_CHECKING:
    from minikubelet.services.api_pods import ApiPods

API_VERSION = "minikubelet.io/v1alpha1"
KIND = "PodExplanation"
MAX_EVENTS = 20
MAX_OUTPUT = 1024
_TIMES = ("backoffUntil", "lastPullAt")


class PodExplainer:
    def __init__(self, store: ExplainStore, clock: Clock, pods: Callable[[], Iterable[Pod]],
                 statuses: StatusManager, recorder: EventRecorder, runtime: Runtime,
                 probes: Callable[[], ProbeManager | None], cgroups: Callable[[], CgroupSource | None],
                 actuated: Callable[[], PodResourceCheckpoint | None], eviction: EvictionManager | None,
                 written: Callable[[str], bool | None]) -> None:
        self.store = store
        self._clock = clock
        self._pods = pods
        self._statuses = statuses
        self._recorder = recorder
        self._runtime = runtime
        self._probes = probes
        self._cgroups = cgroups
        self._actuated = actuated
        self._eviction = eviction
        self._written = written  # joined: whether the API server has the pod's latest status (None standalone)

    def find(self, namespace: str, name: str) -> Pod | None:
        """The newest version the node knows of that pod (a static pod's replacement waits behind the old one)."""
        found = [p for p in self._pods() if podview.namespace(p) == namespace and podview.name(p) == name]
        return found[-1] if found else None

    # --- the probes' side, also recorded with a kill decision -------------------------------------
    def probe_detail(self, uid: str, container: str, kind: str) -> dict[str, Any] | None:
        manager = self._probes()
        if manager is None:
            return None
        k = ProbeKind(kind)
        worker = manager.worker(uid, container, k)
        cached = manager.results.get(uid, container, k)
        if worker is None and cached is None:
            return None
        out: dict[str, Any] = {"container": container, "kind": kind}
        if cached is not None:
            out.update(result=cached.result.name.capitalize(), since=rfc3339(cached.since),
                       containerID=cached.container_id)
            if cached.output:
                out["output"] = cut(cached.output, MAX_OUTPUT)
        if worker is not None:
            out.update(periodSeconds=worker.period, failureThreshold=worker.failure_threshold,
                       successThreshold=worker.success_threshold)
            last, count = worker.consecutive
            if last is not None:
                out["consecutive"] = {"result": last.name.capitalize(), "count": count}
            if worker.last_run is not None:
                at, took, outcome = worker.last_run
                run: dict[str, Any] = {"at": rfc3339(at), "durationSeconds": round(took, 4),
                                       "result": outcome.result.name.capitalize()}
                if outcome.output:
                    run["output"] = cut(outcome.output, MAX_OUTPUT)
                out["lastRun"] = run
        return out

    # --- the document ---------------------------------------------------------------------------
    async def explain(self, namespace: str, name: str) -> dict[str, Any] | None:
        pod = self.find(namespace, name)
        if pod is None:
            return None
        view = PodView.of(pod)
        uid = view.uid
        rec = self.store.get(uid)
        now = self._clock.now()
        status = self._statuses.get_pod_status(uid) or {}
        doc: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "pod": {"namespace": namespace, "name": name, "uid": uid},
            "generatedAt": rfc3339(now),
            "lifecycle": _lifecycle(rec, now),
            "status": _status(status),
            "admission": _admission(rec),
            "decision": _decision(rec, now),
            "probes": [d for c in _containers(view) for k in ProbeKind
                       if c.probe(k.value) is not None and (d := self.probe_detail(uid, c.name, k.value)) is not None],
            "resources": await self._resources(view),
            "resize": _resize(view, status),
            "eviction": self._eviction_doc(rec),
            "events": _events(self._recorder.list(uid)),
        }
        if rec is not None and rec.stage in ("terminating", "terminated"):
            doc["deleteWaitsFor"] = self._delete_waits(view, rec, now)
        return doc

    async def _resources(self, view: PodView) -> dict[str, Any]:
        cgroups, actuated = self._cgroups(), self._actuated()
        try:
            listed = await self._runtime.list_containers({LABEL_POD_UID: view.uid})
        except RuntimeError_:
            listed = []
        running = {name_of(c): c for c in listed if c.state is ContainerState.RUNNING}
        containers: list[dict[str, Any]] = []
        for c in _containers(view):
            entry: dict[str, Any] = {"name": c.name, "requests": dict(c.requests or {}), "limits": dict(c.limits or {})}
            allocated = actuated.container(view.uid, c.name) if actuated is not None else None
            if allocated is not None:
                entry["actuated"] = allocated
            expected = cgroups.container_resources(view, c) if cgroups is not None else None
            if expected is not None:
                entry["expected"] = _linux(expected)
            cs = running.get(c.name)
            if cs is not None:
                try:
                    reported = (await self._runtime.container_status(cs.id)).resources
                except RuntimeError_:
                    reported = None
                if reported is not None:
                    entry["runtime"] = _linux(reported)
                    if expected is not None:
                        entry["differences"] = _differences(_linux(expected), entry["runtime"],
                                                            ("cpuQuota", "cpuPeriod", "cpuShares", "memoryLimitBytes"))
                kernel = cgroups.read_container_cgroup(view, cs.id, expected) if cgroups and expected else None
                if kernel is not None:
                    should, holds = _config(kernel[0]), _config(kernel[1])
                    entry["kernel"] = {"expected": should, "actual": holds,
                                       "differences": _differences(should, holds, tuple(should))}
            containers.append(entry)
        out: dict[str, Any] = {"containers": containers}
        if cgroups is not None:
            want, have = cgroups.pod_cgroup_config(view), cgroups.read_pod_cgroup(view)
            if want is not None:
                pod_cg: dict[str, Any] = {"expected": _config(want)}
                if have is not None:
                    pod_cg["kernel"] = _config(have)
                    pod_cg["differences"] = _differences(pod_cg["expected"], pod_cg["kernel"], tuple(pod_cg["expected"]))
                out["podCgroup"] = pod_cg
        return out

    def _eviction_doc(self, rec: PodRecord | None) -> dict[str, Any]:
        m = self._eviction
        out: dict[str, Any] = {"signals": [], "nodeConditions": list(m.conditions) if m is not None else []}
        if m is not None:
            for t in m.settings.thresholds:
                obs = m.observations.get(t.signal)
                sig: dict[str, Any] = {"signal": t.signal, "threshold": t.describe(), "hard": t.hard}
                if obs is not None:
                    amount = t.value.amount(obs.capacity)
                    sig.update(available=format_amount(t.signal, obs.available),
                               capacity=format_amount(t.signal, obs.capacity),
                               thresholdAmount=format_amount(t.signal, amount), met=obs.available < amount)
                out["signals"].append(sig)
        r = rec.eviction if rec is not None else None
        if r is not None:
            out["rank"] = {"signal": r.signal, "resource": r.resource, "rank": r.rank, "of": r.of,
                           "usage": format_amount(r.signal, r.usage), "at": rfc3339(r.at)}
        return out

    def _delete_waits(self, view: PodView, rec: PodRecord, now: float) -> list[str]:
        """What the pod's end still waits for, in upstream's order (the containers, the worker's final status,
        the API server's copy of it, then the final DELETE)."""
        waits: list[str] = []
        t = rec.termination
        if rec.stage == "terminating" and t is not None:
            deadline = rec.stage_since + t.grace_seconds
            waits.append(f"containers to stop: {', '.join(t.live_containers) or 'none'} "
                         f"(grace {t.grace_seconds}s, {max(0.0, deadline - now):.0f}s left)")
        entry = self._statuses.get(view.uid)
        if entry is None or not entry.finished:
            waits.append("the final status: volumes unmounted, nothing of the pod running")
        written = self._written(view.uid)
        if written is False:
            waits.append("the API server to accept the pod's final status")
        if view.deletion_timestamp and not waits:
            waits.append("the final DELETE (sent by the status sync once the API server has the terminal phase)")
        return waits


def _containers(view: PodView) -> tuple[ContainerView, ...]:
    return (*view.init_containers, *view.app_containers, *view.ephemeral_containers)[:MAX_CONTAINERS]


def _lifecycle(rec: PodRecord | None, now: float) -> dict[str, Any]:
    if rec is None:
        return {"stage": "unknown"}
    out: dict[str, Any] = {"stage": rec.stage, "since": rfc3339(rec.stage_since or now)}
    t = rec.termination
    if t is not None:
        out["kill"] = {"reason": t.reason, "message": t.message, "gracePeriodSeconds": t.grace_seconds}
    return out


def _status(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: status[k] for k in ("phase", "reason", "message", "qosClass") if status.get(k)}
    out["conditions"] = [{k: c[k] for k in ("type", "status", "reason", "message") if c.get(k)}
                         for c in status.get("conditions") or [] if isinstance(c, dict)]
    return out


def _resize(view: PodView, status: dict[str, Any]) -> dict[str, Any]:
    """An in-place resize as the status generation reported it: the spec's resources, what was allocated (admitted)
    and the PodResizePending/PodResizeInProgress conditions that say why they differ."""
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    out: dict[str, Any] = {}
    for kind in ("PodResizePending", "PodResizeInProgress"):
        c = conditions.get(kind)
        if c is not None:
            out[kind[0].lower() + kind[1:]] = {k: c[k] for k in ("status", "reason", "message") if c.get(k)}
    allocated = {cs.get("name"): cs.get("allocatedResources") for cs in status.get("containerStatuses") or []
                 if isinstance(cs, dict) and cs.get("allocatedResources")}
    waiting = [{"name": c.name, "requests": dict(c.requests or {}), "allocated": allocated[c.name]}
               for c in view.app_containers if c.name in allocated and not _same(c.requests or {}, allocated[c.name])]
    if waiting:
        out["notAllocated"] = waiting
    return out


def _same(requests: Any, allocated: Any) -> bool:
    try:
        return {k: parse_quantity(str(v)) for k, v in dict(requests).items()} == \
            {k: parse_quantity(str(v)) for k, v in dict(allocated).items() if k in dict(requests)}
    except ValueError:
        return False


def _admission(rec: PodRecord | None) -> dict[str, Any]:
    a = rec.admission if rec is not None else None
    if a is None:
        return {"admitted": None}
    out: dict[str, Any] = {"admitted": a.admitted, "at": rfc3339(a.at)}
    if not a.admitted:
        out.update(reason=a.reason, message=a.message)
        if a.details:
            out["refusal"] = dict(a.details)
    return out


def _container(d: ContainerDecision, now: float) -> dict[str, Any]:
    out = d.render()
    for key in _TIMES:
        if isinstance(out.get(key), float):
            if key == "backoffUntil":
                out["backoffRemainingSeconds"] = round(max(0.0, out[key] - now), 1)
            out[key] = rfc3339(out[key])
    if "exitCodes" in out:
        out["exitCodes"] = list(out["exitCodes"])
    return out


def _decision(rec: PodRecord | None, now: float) -> dict[str, Any] | None:
    if rec is None or rec.decision is None:
        return None
    out: dict[str, Any] = {"since": rfc3339(rec.decided_at), "syncs": rec.syncs,
                           "containers": [_container(c, now) for c in rec.decision.containers]}
    if rec.decision.note:
        out["note"] = rec.decision.note
    if rec.last_kills:
        out["lastKills"] = [_container(c, now) for c in rec.last_kills.values()]
    return out


def _events(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for e in items[-MAX_EVENTS:]:
        obj = e.get("involvedObject") or {}
        entry = {"type": e.get("type"), "reason": e.get("reason"), "message": cut(str(e.get("message") or "")),
                 "count": e.get("count"), "first": e.get("firstTimestamp"), "last": e.get("lastTimestamp")}
        if obj.get("fieldPath"):
            entry["fieldPath"] = obj["fieldPath"]
        out.append(entry)
    return out


def _linux(r: LinuxResources) -> dict[str, int]:
    return {"cpuQuota": r.cpu_quota, "cpuPeriod": r.cpu_period, "cpuShares": r.cpu_shares,
            "memoryLimitBytes": r.memory_limit_bytes, "pidsLimit": r.pids_limit}


def _config(c: ResourceConfig) -> dict[str, int]:
    camel = {"cpu_shares": "cpuShares", "cpu_quota": "cpuQuota", "cpu_period": "cpuPeriod",
             "memory_limit": "memoryLimit", "pids_limit": "pidsLimit", "memory_min": "memoryMin",
             "memory_high": "memoryHigh"}
    return {camel[f.name]: v for f in dataclasses.fields(c) if (v := getattr(c, f.name)) is not None}


def _differences(want: dict[str, int], have: dict[str, int], keys: Iterable[str]) -> list[dict[str, Any]]:
    """The settings whose value read back is not the one asked for (a 0 unset on one side counts)."""
    return [{"setting": k, "expected": want.get(k), "actual": have.get(k)} for k in keys
            if k in want and want.get(k) != have.get(k)]


class ExplainParts(Protocol):
    """What `explain` reads of the composition root."""

    @property
    def clock(self) -> Clock: ...

    @property
    def recorder(self) -> EventRecorder: ...

    @property
    def runtime(self) -> Runtime: ...

    @property
    def statuses(self) -> StatusManager: ...

    @property
    def syncer(self) -> PodSyncer: ...

    @property
    def manager(self) -> PodManager: ...

    @property
    def workers(self) -> PodWorkers: ...

    @property
    def eviction(self) -> EvictionService: ...

    @property
    def server(self) -> KubeletServer: ...

    @property
    def images(self) -> ImagePuller: ...

    @property
    def container_backoff(self) -> Backoff: ...

    @property
    def probes(self) -> ProbeSource: ...

    @property
    def cgroups(self) -> CgroupSource | None: ...

    @property
    def api_pods(self) -> ApiPods | None: ...


def explain_pods(agent: ExplainParts) -> PodExplainer:
    """Build `explain` and hand its recording hooks to the deciders and its document to the servers."""
    store = ExplainStore()

    def probe_manager() -> ProbeManager | None:
        return agent.probes.manager if isinstance(agent.probes, ManagerProbeSource) else None

    def written(uid: str) -> bool | None:
        return agent.api_pods.status_sync.written(uid) if agent.api_pods is not None else None

    explainer = PodExplainer(store, agent.clock, lambda: [*agent.workers.pods(), *agent.manager.desired.values()],
                             agent.statuses, agent.recorder, agent.runtime, probe_manager, lambda: agent.cgroups,
                             lambda: agent.syncer.actuated, agent.eviction.manager, written)
    agent.syncer.explain = SyncExplainer(store, agent.clock, agent.container_backoff, agent.images,
                                         explainer.probe_detail)
    agent.manager.explain = store
    agent.eviction.manager.explain = store
    agent.server.explain = explainer.explain
    return explainer
