"""The controllers a node meets behind its pods, in the harness: kube-scheduler's binding, the node
lifecycle controller's not-ready taint, and kube-controller-manager's Deployment/ReplicaSet, Job and
DaemonSet controllers, each reduced to what a node can see of it (upstream v1.36):

- Deployment -> ReplicaSet `<deployment>-<pod-template-hash>` -> pods `generateName: <rs>-` with the
  template's labels plus `pod-template-hash`, a controller owner reference, deleted through the normal
  graceful delete when scaled down (unscheduled, then pending, then not-ready, then newest first).
- Job -> pods `generateName: <job>-` with `batch.kubernetes.io/controller-uid`/`job-name` (and the legacy
  `controller-uid`/`job-name`) labels and the `batch.kubernetes.io/job-tracking` finalizer, removed once
  the pod is terminal and counted; `backoffLimit`, the 10 s doubling pod failure back-off, and the
  `SuccessCriteriaMet`/`Complete` or `FailureTarget`/`Failed` conditions.
- DaemonSet -> one pod per node, unbound, pinned with node affinity `matchFields metadata.name`, with the
  tolerations the DaemonSet controller adds; the scheduler binds it as any other pod.
- Scheduler: binds pods without `spec.nodeName` (pods/binding) to a Ready node whose taints they tolerate
  and whose labels/name match their nodeSelector and required node affinity, then the `Scheduled` event.

Not here: resource fit, rolling updates (a new template scales the old ReplicaSet to 0 at once),
Indexed jobs, pod failure policies, controllers' own events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.apiserver import errors
from tests.apiserver.auth import User
from tests.apiserver.resources import resource
from tests.apiserver.store import Store, Watch, now_rfc3339

if TYPE_CHECKING:
    from tests.apiserver.registry import Registry

Json = dict[str, Any]
PLURALS = ("deployments", "replicasets", "jobs", "daemonsets")
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
JOB_BACKOFF = 10.0  # DefaultJobPodFailureBackOff, doubled per failure
JOB_MAX_BACKOFF = 600.0  # MaxJobPodFailureBackOff
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
_PRESSURE_TAINTS = (("MemoryPressure", "node.kubernetes.io/memory-pressure"),
                    ("DiskPressure", "node.kubernetes.io/disk-pressure"),
                    ("PIDPressure", "node.kubernetes.io/pid-pressure"))
_CONDITION_TAINTS = {"Ready": "node.kubernetes.io/not-ready", **dict(_PRESSURE_TAINTS)}  # utilrand.SafeEncodeString's alphabet


def _controller(name: str) -> User:
    return User(f"system:serviceaccount:kube-system:{name}",
                ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


SCHEDULER = User("system:kube-scheduler", ("system:authenticated",))
RS_CONTROLLER = _controller("replicaset-controller")
JOB_CONTROLLER = _controller("job-controller")
DS_CONTROLLER = _controller("daemon-set-controller")


def template_hash(template: Json) -> str:
    """controller.ComputeHash: FNV-32a of the template, its decimal digits made safe for names."""
    h = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True, separators=(",", ":")).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[b % len(_SAFE)] for b in str(h).encode())


def prepare_create(plural: str, obj: Json) -> None:
    """The API server's defaulting of a workload being created (its uid is chosen here because the
    Job's selector names it)."""
    md = obj["metadata"]
    md["uid"] = str(uuid.uuid4())
    md["generation"] = 1
    spec = obj.setdefault("spec", {})
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {})
    if plural == "jobs":
        labels = {"batch.kubernetes.io/controller-uid": md["uid"], "batch.kubernetes.io/job-name": md["name"],
                  "controller-uid": md["uid"], "job-name": md["name"]}
        template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}), **labels}
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": md["uid"]}})
        for key, value in (("parallelism", 1), ("completions", 1), ("backoffLimit", 6),
                           ("completionMode", "NonIndexed"), ("suspend", False),
                           ("podReplacementPolicy", "TerminatingOrFailed")):
            spec.setdefault(key, value)
    elif plural in ("deployments", "replicasets"):
        spec.setdefault("replicas", 1)
    obj["status"] = {}


def _owner(obj: Json) -> Json:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _controlled_by(pod: Json, uid: str) -> bool:
    return any(o.get("controller") and o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or [])


def _terminal(pod: Json) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _active(pod: Json) -> bool:
    return not _terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def _condition(obj: Json, kind: str) -> str:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status", ""))
    return ""


def _ready(pod: Json) -> bool:
    return _condition(pod, "Ready") == "True"


def _tolerates(tolerations: list[Json], taint: Json) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _requirement(req: Json, value: str | None) -> bool:
    op, values = req.get("operator"), req.get("values") or []
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    return False


def fits(pod: Json, node: Json) -> bool:
    """The scheduler's filters a node-local test cluster exercises: Ready, schedulable, taints
    (NoSchedule/NoExecute), nodeSelector, required node affinity (label expressions and fields)."""
    spec, nmd = pod.get("spec") or {}, node["metadata"]
    if _condition(node, "Ready") != "True" or (node.get("spec") or {}).get("unschedulable"):
        return False
    tolerations = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
            return False
    labels = nmd.get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(
        all(_requirement(r, labels.get(r.get("key", ""))) for r in term.get("matchExpressions") or [])
        and all(_requirement(r, nmd["name"] if r.get("key") == "metadata.name" else None)
                for r in term.get("matchFields") or [])
        for term in terms)


def daemon_tolerations(template_spec: Json) -> list[Json]:
    """util.AddOrUpdateDaemonPodTolerations: what every DaemonSet pod tolerates."""
    added = [("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
             ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
             ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")]
    if template_spec.get("hostNetwork"):
        added.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
    out = list(template_spec.get("tolerations") or [])
    for key, effect in added:
        out = [t for t in out if not (t.get("key") == key and t.get("effect") == effect)]
        out.append({"key": key, "operator": "Exists", "effect": effect})
    return out


def _delete_rank(pod: Json) -> tuple[int, int, int, str]:
    """controller.ActivePods' order, the first deleted first: unassigned, Pending < Unknown < Running,
    not ready, then the newest."""
    phase = (pod.get("status") or {}).get("phase", "")
    newest_first = "".join(chr(0x10FFFF - ord(c)) for c in pod["metadata"].get("creationTimestamp", ""))
    return (1 if (pod.get("spec") or {}).get("nodeName") else 0,
            {"Pending": 0, "Unknown": 1, "Running": 2}.get(phase, 0), 1 if _ready(pod) else 0, newest_first)


class Workloads:
    """All the controllers above, reconciled together after every write they watch and once a second
    (for the Job back-off). `reconcile()` is one synchronous pass, for unit tests."""

    def __init__(self, store: Store, registry: Registry, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self._failures_seen: dict[str, tuple[int, float]] = {}  # job uid -> (failed count, when seen)
        self._task: asyncio.Task[None] | None = None
        self._watches: list[Watch] = []

    def start(self) -> None:
        queue: asyncio.Queue[tuple[str, Json] | None] = asyncio.Queue()
        for plural in ("pods", "nodes", *PLURALS):
            watch = Watch(plural, None, lambda _o: True, queue)
            self.store.watches[watch] = None
            self._watches.append(watch)
        self._task = asyncio.get_running_loop().create_task(self._run(queue))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for watch in self._watches:
            self.store.close_watch(watch)
        self._watches.clear()

    async def _run(self, queue: asyncio.Queue[tuple[str, Json] | None]) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(queue.get(), timeout=1.0)
            while not queue.empty():
                queue.get_nowait()
            self.reconcile()

    def reconcile(self) -> None:
        self.node_taints()
        for dep in self.store.list_objects("deployments"):
            self.deployment(dep)
        for rs in self.store.list_objects("replicasets"):
            self.replicaset(rs)
        for job in self.store.list_objects("jobs"):
            self.job(job)
        for ds in self.store.list_objects("daemonsets"):
            self.daemonset(ds)
        self.schedule()

    # helpers ---------------------------------------------------------------------------------------
    def _pods(self, ns: str, owner_uid: str) -> list[Json]:
        return [p for p in self.store.list_objects("pods", ns) if _controlled_by(p, owner_uid)]

    def _create_pod(self, user: User, owner: Json, template: Json, generate: str, **extra: Any) -> Json:
        md = template.get("metadata") or {}
        pod_md: Json = {"generateName": generate, "namespace": owner["metadata"]["namespace"],
                        "labels": dict(md.get("labels") or {}), "ownerReferences": [_owner(owner)]}
        if md.get("annotations"):
            pod_md["annotations"] = dict(md["annotations"])
        pod_md.update(extra.pop("metadata", {}))
        spec = {**json.loads(json.dumps(template.get("spec") or {})), **extra}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_md, "spec": spec}
        ns = owner["metadata"]["namespace"]
        return self.registry.create(user, resource("pods"), ns, body, f"/api/v1/namespaces/{ns}/pods").obj

    def _delete_pod(self, user: User, pod: Json) -> None:
        md = pod["metadata"]
        with contextlib.suppress(errors.ApiError):
            self.registry.delete(user, resource("pods"), md["namespace"], md["name"], {})

    def _set_status(self, plural: str, obj: Json, status: Json, *, replace: bool = False) -> None:
        merged = status if replace else {**(obj.get("status") or {}), **status}
        if merged != obj.get("status"):
            fresh = self.store.get(plural, obj["metadata"]["namespace"], obj["metadata"]["name"])
            if fresh is not None:
                fresh["status"] = merged
                self.store.update(plural, fresh)

    # node lifecycle: the not-ready NoSchedule taint follows the Ready condition, and (TaintNodesByCondition)
    # the memory-, disk- and pid-pressure NoSchedule taints follow the pressure conditions ----------------
    def node_taints(self) -> None:
        for node in self.store.list_objects("nodes"):
            spec = node.setdefault("spec", {})
            taints = spec.get("taints") or []
            others = [t for t in taints if not (t.get("key") in _CONDITION_TAINTS.values()
                                                and t.get("effect") == "NoSchedule")]
            wanted = list(others)
            if _condition(node, "Ready") != "True":
                wanted.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
            wanted += [{"key": key, "effect": "NoSchedule"} for ctype, key in _PRESSURE_TAINTS
                       if _condition(node, ctype) == "True"]
            if wanted != taints:
                spec["taints"] = wanted
                if not wanted:
                    spec.pop("taints")
                self.store.update("nodes", node)

    # Deployment -> ReplicaSet ------------------------------------------------------------------------
    def deployment(self, dep: Json) -> None:
        md, spec, ns = dep["metadata"], dep.get("spec") or {}, dep["metadata"]["namespace"]
        template = spec.get("template") or {}
        phash = template_hash(template)
        name = f"{md['name']}-{phash}"
        owned = [rs for rs in self.store.list_objects("replicasets", ns) if _controlled_by(rs, md["uid"])]
        for rs in owned:
            if rs["metadata"]["name"] != name and rs["spec"].get("replicas"):
                rs["spec"]["replicas"] = 0
                self.store.update("replicasets", rs)
        current = next((rs for rs in owned if rs["metadata"]["name"] == name), None)
        replicas = spec.get("replicas", 1)
        if current is None:
            labels = {**((template.get("metadata") or {}).get("labels") or {}), "pod-template-hash": phash}
            selector = json.loads(json.dumps(spec.get("selector") or {}))
            selector.setdefault("matchLabels", {})["pod-template-hash"] = phash
            rs_template = {**template, "metadata": {**(template.get("metadata") or {}), "labels": labels}}
            body = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [_owner(dep)],
                                 "annotations": {"deployment.kubernetes.io/desired-replicas": str(replicas),
                                                 "deployment.kubernetes.io/revision": str(len(owned) + 1)}},
                    "spec": {"replicas": replicas, "selector": selector, "template": rs_template}}
            self.registry.create(RS_CONTROLLER, resource("replicasets"), ns, body,
                                 f"/apis/apps/v1/namespaces/{ns}/replicasets")
            return
        if current["spec"].get("replicas") != replicas:
            current["spec"]["replicas"] = replicas
            current["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/desired-replicas"] = str(replicas)
            self.store.update("replicasets", current)
        all_status = [rs.get("status") or {} for rs in owned]
        self._set_status("deployments", dep, {
            "observedGeneration": md.get("generation", 1),
            "replicas": sum(s.get("replicas", 0) for s in all_status),
            "updatedReplicas": (current.get("status") or {}).get("replicas", 0),
            "readyReplicas": sum(s.get("readyReplicas", 0) for s in all_status),
            "availableReplicas": sum(s.get("availableReplicas", 0) for s in all_status)})

    def replicaset(self, rs: Json) -> None:
        md, spec = rs["metadata"], rs.get("spec") or {}
        pods = self._pods(md["namespace"], md["uid"])
        active = [p for p in pods if _active(p)]
        diff = spec.get("replicas", 1) - len(active)
        for _ in range(max(diff, 0)):
            self._create_pod(RS_CONTROLLER, rs, spec.get("template") or {}, f"{md['name']}-")
        for pod in sorted(active, key=_delete_rank)[:max(-diff, 0)]:
            self._delete_pod(RS_CONTROLLER, pod)
        pods = [p for p in self._pods(md["namespace"], md["uid"]) if _active(p)]
        ready = sum(1 for p in pods if _ready(p))
        self._set_status("replicasets", rs, {"replicas": len(pods), "fullyLabeledReplicas": len(pods),
                                             "readyReplicas": ready, "availableReplicas": ready,
                                             "observedGeneration": md.get("generation", 1)})

    # Job -------------------------------------------------------------------------------------------
    def job(self, job: Json) -> None:
        md, spec, ns = job["metadata"], job.get("spec") or {}, job["metadata"]["namespace"]
        status = dict(job.get("status") or {})
        pods = self._pods(ns, md["uid"])
        for pod in pods:  # count each finished pod once, then release it
            finalizers = pod["metadata"].get("finalizers") or []
            if _terminal(pod) and JOB_TRACKING_FINALIZER in finalizers:
                key = "succeeded" if pod["status"]["phase"] == "Succeeded" else "failed"
                status[key] = status.get(key, 0) + 1
                self._set_status("jobs", job, {key: status[key]})
                job = self.store.get("jobs", ns, md["name"]) or job
                self._release(pod)
        active = [p for p in self._pods(ns, md["uid"]) if _active(p)]
        now = now_rfc3339()
        conditions = list(status.get("conditions") or [])
        finished = any(c["type"] in ("Complete", "Failed") for c in conditions)
        succeeded, failed = status.get("succeeded", 0), status.get("failed", 0)
        if not finished and succeeded >= spec.get("completions", 1):
            conditions += [_job_condition("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods", now),
                           _job_condition("Complete", "CompletionsReached", "Reached expected number of succeeded pods", now)]
            status["completionTime"] = now
            finished = True
        elif not finished and failed > spec.get("backoffLimit", 6):
            conditions += [_job_condition("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now),
                           _job_condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now)]
            finished = True
        if finished:
            for pod in active:
                self._delete_pod(JOB_CONTROLLER, pod)
        elif self._backoff_over(md["uid"], failed):
            wanted = min(spec.get("parallelism", 1), spec.get("completions", 1) - succeeded)
            for _ in range(max(wanted - len(active), 0)):
                self._create_pod(JOB_CONTROLLER, job, spec.get("template") or {}, f"{md['name']}-",
                                 metadata={"finalizers": [JOB_TRACKING_FINALIZER]})
        active = [p for p in self._pods(ns, md["uid"]) if _active(p)]
        terminating = sum(1 for p in self._pods(ns, md["uid"]) if p["metadata"].get("deletionTimestamp")
                          and not _terminal(p))
        status.update({"startTime": status.get("startTime", now), "active": len(active),
                       "ready": sum(1 for p in active if _ready(p)), "terminating": terminating,
                       "uncountedTerminatedPods": {}, "conditions": conditions})
        if not status["active"]:
            status.pop("active")
        if not conditions:
            status.pop("conditions")
        self._set_status("jobs", self.store.get("jobs", ns, md["name"]) or job, status, replace=True)

    def _backoff_over(self, uid: str, failed: int) -> bool:
        if failed == 0:
            return True
        seen, since = self._failures_seen.get(uid, (0, 0.0))
        if seen != failed:
            self._failures_seen[uid] = (failed, self.clock())
            since = self.clock()
        return self.clock() - since >= min(JOB_BACKOFF * 2.0 ** (int(failed) - 1), JOB_MAX_BACKOFF)

    def _release(self, pod: Json) -> None:
        md = pod["metadata"]
        fresh = self.store.get("pods", md["namespace"], md["name"])
        if fresh is None:
            return
        kept = [f for f in fresh["metadata"].get("finalizers") or [] if f != JOB_TRACKING_FINALIZER]
        fresh["metadata"]["finalizers"] = kept
        if not kept:
            fresh["metadata"].pop("finalizers")
        self.registry.release_finalizers("pods", fresh)

    # DaemonSet -------------------------------------------------------------------------------------
    def daemonset(self, ds: Json) -> None:
        md, spec, ns = ds["metadata"], ds.get("spec") or {}, ds["metadata"]["namespace"]
        template = spec.get("template") or {}
        pods = self._pods(ns, md["uid"])
        nodes = [n for n in self.store.list_objects("nodes") if not n["metadata"].get("deletionTimestamp")]
        for pod in pods:
            if (pod.get("status") or {}).get("phase") == "Failed" and not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(DS_CONTROLLER, pod)  # the controller replaces failed daemon pods
        for node in nodes:
            name = node["metadata"]["name"]
            if any(_active(p) and _pinned_to(p) == name for p in self._pods(ns, md["uid"])):
                continue
            labels = {**((template.get("metadata") or {}).get("labels") or {}),
                      "controller-revision-hash": template_hash(template),
                      "pod-template-generation": str(md.get("generation", 1))}
            tspec = template.get("spec") or {}
            affinity = json.loads(json.dumps(tspec.get("affinity") or {}))
            affinity.setdefault("nodeAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}
            self._create_pod(DS_CONTROLLER, ds, {**template, "metadata": {**(template.get("metadata") or {}), "labels": labels}},
                             f"{md['name']}-", affinity=affinity, tolerations=daemon_tolerations(tspec))
        pods = [p for p in self._pods(ns, md["uid"]) if _active(p)]
        ready = sum(1 for p in pods if _ready(p))
        self._set_status("daemonsets", ds, {
            "currentNumberScheduled": len(pods), "numberMisscheduled": 0, "desiredNumberScheduled": len(nodes),
            "numberReady": ready, "observedGeneration": md.get("generation", 1), "updatedNumberScheduled": len(pods),
            "numberAvailable": ready})

    # kube-scheduler ---------------------------------------------------------------------------------
    def schedule(self) -> None:
        nodes = sorted(self.store.list_objects("nodes"), key=lambda n: n["metadata"]["name"])
        for pod in self.store.list_objects("pods"):
            spec, md = pod.get("spec") or {}, pod["metadata"]
            if spec.get("nodeName") or md.get("deletionTimestamp") or _terminal(pod):
                continue
            if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
                continue
            fitting = [n for n in nodes if fits(pod, n)]
            if not fitting:
                continue
            node = fitting[0]["metadata"]["name"]
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": md["name"], "namespace": md["namespace"]},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
            try:
                self.registry.bind(md["namespace"], md["name"], binding)
            except errors.ApiError:
                continue
            self._scheduled_event(pod, node)

    def _scheduled_event(self, pod: Json, node: str) -> None:
        """An events.k8s.io/v1 Event, as core/v1 shows it (eventTime, no source or count)."""
        md = pod["metadata"]
        now = time.time()
        micro = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
        event = {"kind": "Event", "apiVersion": "v1", "metadata": {"name": f"{md['name']}.{time.time_ns():x}", "namespace": md["namespace"]},
                 "involvedObject": {"kind": "Pod", "namespace": md["namespace"], "name": md["name"], "uid": md["uid"],
                                    "apiVersion": "v1", "resourceVersion": md["resourceVersion"]},
                 "reason": "Scheduled", "message": f"Successfully assigned {md['namespace']}/{md['name']} to {node}",
                 "source": {}, "firstTimestamp": None, "lastTimestamp": None, "type": "Normal", "eventTime": micro,
                 "action": "Binding", "reportingComponent": "default-scheduler",
                 "reportingInstance": "default-scheduler-harness"}
        self.store.create("events", event)


def _pinned_to(pod: Json) -> str:
    """The node a daemon pod is for: its nodeName, or the matchFields term it was created with."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    for term in terms:
        for req in term.get("matchFields") or []:
            if req.get("key") == "metadata.name" and req.get("values"):
                return str(req["values"][0])
    return ""


def _job_condition(kind: str, reason: str, message: str, now: str) -> Json:
    return {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}
