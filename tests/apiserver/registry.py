"""The verbs on stored resources (get, list, create, update, patch, delete, eviction), with the
registry strategies, admission and preconditions a kubelet meets. HTTP lives in server.py.
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass, field
from typing import Any

from tests.apiserver import admission, errors, openapi, pod_resize, pods, services, workloads
from tests.apiserver.auth import User
from tests.apiserver.patch import PatchError, json_merge, strategic_merge
from tests.apiserver.resources import ZERO, Resource, resource
from tests.apiserver.store import Store, TooOld, json_copy, now_rfc3339

Json = dict[str, Any]
_STATUS_RESET_ON_MAIN = {"pods", "nodes", "services", "namespaces", "certificatesigningrequests",
                         *workloads.PLURALS}
_GENERATION_ON_SPEC = {"pods", *workloads.PLURALS}
# Their strategies' AllowUnconditionalUpdate() is false: a PUT must carry a resourceVersion.
_NO_UNCONDITIONAL_UPDATE = {"leases", "certificatesigningrequests"}
_SYSTEM_METADATA = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def _merge_string_data(secret: Json) -> None:
    """The Secret conversion: `stringData` is write-only, merged into `data` (base64) and never stored."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.setdefault("data", {})
        data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()})


@dataclass
class Violation:
    """A write whose body the API server's decoder would not take as it is."""

    user: str
    verb: str
    path: str
    type_errors: list[str]
    unknown_fields: list[str]


@dataclass
class WriteResult:
    obj: Json
    warnings: list[str] = field(default_factory=list)


def _later(seconds: int) -> str:
    t = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def typed(res: Resource, obj: Json) -> Json:
    """kind and apiVersion first, as the API server serialises them."""
    out: Json = {"kind": res.kind, "apiVersion": res.api_version}
    out.update({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})
    return out


class Registry:
    def __init__(self, store: Store, ca_pem: bytes) -> None:
        self.store = store
        self.ca_pem = ca_pem
        self.schemas = openapi.load()
        self.violations: list[Violation] = []
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.ensure_namespace(ns)
        self.store.create("services", typed(resource("services"), services.kubernetes_service()))

    # namespaces spring into existence with what their controllers would add ----------------------
    def ensure_namespace(self, ns: str) -> None:
        if not ns or self.store.get("namespaces", "", ns) is not None:
            return
        self.store.create("namespaces", typed(resource("namespaces"), {
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}))
        self.store.create("serviceaccounts", typed(resource("serviceaccounts"), {
            "metadata": {"name": "default", "namespace": ns}}))
        self.store.create("configmaps", typed(resource("configmaps"), {
            "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns,
                         "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to "
                                         "verify the kube-apiserver when using internal endpoints such as the "
                                         "internal service IP or kubernetes.default.svc. No other usage is "
                                         "guaranteed across distributions of Kubernetes clusters."}},
            "data": {"ca.crt": self.ca_pem.decode()}}))

    # reads ---------------------------------------------------------------------------------------
    def get(self, res: Resource, ns: str, name: str) -> Json:
        obj = self.store.get(res.plural, ns, name)
        if obj is None:
            raise errors.not_found(res, name)
        return obj

    def list_objects(self, res: Resource, ns: str, matches: Any, rv: str, rv_match: str) -> Json:
        if rv and rv != "0" and rv_match == "Exact":
            try:
                self.store.changes_since(int(rv))
            except TooOld as exc:
                raise errors.expired("The resourceVersion for the provided list is too old.") from exc
        items = [o for o in self.store.list_objects(res.plural, ns or None) if matches(o)]
        for item in items:
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)}, "items": items}

    # schema checks -------------------------------------------------------------------------------
    def decode(self, user: User, verb: str, path: str, res: Resource, obj: Json) -> list[str]:
        """Check `obj` against the OpenAPI schema; drop unknown fields (returning the warnings) and
        refuse wrong types with 400, as the decoder does. Either is recorded as a Violation."""
        schema = self.schemas.for_kind(*res.gvk)
        if schema is None:
            return []
        type_errors, unknown = self.schemas.check(obj, schema)
        names = [openapi.format_path(p) for p in unknown]
        if type_errors or unknown:
            self.violations.append(Violation(user.name, verb, path, type_errors, names))
        if type_errors:
            raise errors.bad_request(
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: {"; ".join(type_errors)}'
            )
        for p in unknown:
            openapi.drop(obj, p)
        return [f'unknown field "{n}"' for n in names]

    # create --------------------------------------------------------------------------------------
    def create(self, user: User, res: Resource, ns: str, body: Json, path: str) -> WriteResult:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        obj = typed(res, json_copy(body))
        warnings = self.decode(user, "create", path, res, obj)
        md = obj.setdefault("metadata", {})
        if res.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if not md.get("name") and md.get("generateName"):
            md["name"] = pods.generate_name(md["generateName"])
        if not md.get("name"):
            raise errors.ApiError(errors.status(422, "Invalid", f"{res.kind} \"\" is invalid: metadata.name: Required value: name or generateName is required", {"kind": res.kind, "causes": [{"reason": "FieldValueRequired", "message": "Required value: name or generateName is required", "field": "metadata.name"}]}))
        if md.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        for key in _SYSTEM_METADATA:
            md.pop(key, None)
        if self.store.get(res.plural, ns if res.namespaced else "", md["name"]) is not None:
            raise errors.already_exists(res, md["name"])
        obj = self._prepare_create(user, res, obj)
        if res.namespaced:
            self.ensure_namespace(ns)
        return WriteResult(self.store.create(res.plural, obj), warnings)

    def _prepare_create(self, user: User, res: Resource, obj: Json) -> Json:
        node = user.node_name()
        name = obj["metadata"]["name"]
        if res.plural == "pods":
            if node is not None and (reason := admission.pod_create(node, obj, self.store)):
                raise errors.forbidden(res, name, reason)
            obj = pods.prepare_create(obj)
            if causes := pods.validate_create(obj):
                raise errors.invalid(res, name, causes)
        elif res.plural == "nodes":
            if node is not None and (reason := admission.node_write(node, name, None, obj)):
                raise errors.forbidden(res, name, reason)
            spec = obj.setdefault("spec", {})
            taints = spec.setdefault("taints", [])
            if not any(t.get("key") == "node.kubernetes.io/not-ready" for t in taints):
                taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
            # Go prints these structs even when empty; clients see them in every response.
            obj["status"] = json_merge(json_copy(ZERO["Node"]["status"]), obj.get("status") or {})
        elif res.plural == "leases":
            if node is not None and (reason := admission.lease(node, obj["metadata"]["namespace"], name)):
                raise errors.forbidden(res, name, reason)
        elif res.plural == "secrets":
            obj.setdefault("type", "Opaque")
            _merge_string_data(obj)
        elif res.plural == "services":
            used = {str((s.get("spec") or {}).get("clusterIP")) for s in self.store.list_objects("services", None)}
            obj = services.prepare_create(obj, used)
        elif res.plural == "certificatesigningrequests":
            if node is not None and (reason := admission.csr(node, obj)):
                raise errors.forbidden(res, name, reason)
            spec = obj.setdefault("spec", {})
            spec["username"] = user.name
            if user.uid:
                spec["uid"] = user.uid
            spec["groups"] = list(user.groups)
            if user.extra:
                spec["extra"] = user.extra
            obj["status"] = {}
        elif res.plural in workloads.PLURALS:
            workloads.prepare_create(res.plural, obj)
        return obj

    # update and patch ----------------------------------------------------------------------------
    def update(self, user: User, res: Resource, ns: str, name: str, body: Json, sub: str, path: str) -> WriteResult:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        new = typed(res, json_copy(body))
        warnings = self.decode(user, "update", path, res, new)
        md = new.setdefault("metadata", {})
        if md.get("name") and md["name"] != name:
            raise errors.bad_request(f"the name of the object ({md['name']}) does not match the name on the URL ({name})")
        old = self.get(res, ns, name)
        if not md.get("resourceVersion") and res.plural in _NO_UNCONDITIONAL_UPDATE:
            cause = {"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                     "message": "Invalid value: 0x0: must be specified for an update"}
            raise errors.invalid(res, name, [cause])
        return WriteResult(self._update(user, res, old, new, sub, rv=md.get("resourceVersion", "")), warnings)

    def patch(self, user: User, res: Resource, ns: str, name: str, body: Any, content_type: str, sub: str,
              path: str) -> WriteResult:
        old = self.get(res, ns, name)
        try:
            if content_type == "application/merge-patch+json":
                new = json_merge(old, body)
            elif content_type == "application/strategic-merge-patch+json":
                schema = self.schemas.for_kind(*res.gvk)
                if schema is None:
                    raise errors.ApiError(errors.status(
                        415, "UnsupportedMediaType", f"strategic merge patch is not supported for {res.qualified}"))
                new = strategic_merge(old, body, schema, self.schemas)
            else:
                raise errors.ApiError(errors.status(415, "UnsupportedMediaType", f"the media type {content_type!r} is not supported"))
        except PatchError as exc:
            raise errors.bad_request(str(exc)) from exc
        warnings = self.decode(user, "patch", path, res, new)
        patch_md = body.get("metadata") if isinstance(body, dict) else None
        if isinstance(patch_md, dict) and patch_md.get("uid") and patch_md["uid"] != old["metadata"]["uid"]:
            msg = (f'Operation cannot be fulfilled on {res.qualified} "{name}": Precondition failed: UID in '
                   f'precondition: {patch_md["uid"]}, UID in object meta: {old["metadata"]["uid"]}')
            raise errors.ApiError(errors.status(409, "Conflict", msg, {"name": name, "kind": res.plural}))
        rv = patch_md.get("resourceVersion", "") if isinstance(patch_md, dict) else ""
        return WriteResult(self._update(user, res, old, new, sub, rv=rv), warnings)

    def _update(self, user: User, res: Resource, old: Json, new: Json, sub: str, *, rv: str) -> Json:
        name = old["metadata"]["name"]
        self._admit_update(user, res, old, new, sub)
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(res, name)
        md = new.setdefault("metadata", {})
        if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
            msg = (f'Operation cannot be fulfilled on {res.qualified} "{name}": Precondition failed: UID in '
                   f'precondition: {md["uid"]}, UID in object meta: {old["metadata"]["uid"]}')
            raise errors.ApiError(errors.status(409, "Conflict", msg, {"name": name, "kind": res.plural}))
        for key in _SYSTEM_METADATA:
            md.pop(key, None)
            if key in old["metadata"]:
                md[key] = old["metadata"][key]
        md["name"] = name
        if res.namespaced:
            md["namespace"] = old["metadata"]["namespace"]
        if res.plural == "pods" and sub == "resize":
            new = pod_resize.prepare_update(new, old)
            if causes := pod_resize.validate(new, old):
                raise errors.invalid(res, name, causes)
        elif sub == "ephemeralcontainers":
            new = pods.ephemeral_containers_update(old, new)
            new["metadata"] = {**old["metadata"], "generation": new["metadata"].get("generation")}
            if causes := pods.validate_ephemeral_update(new, old):
                raise errors.invalid(res, name, causes)
        elif sub in ("status", "approval"):
            kept = json_copy(old)
            kept["metadata"] = md
            if res.plural == "pods":
                md["ownerReferences"] = old["metadata"].get("ownerReferences")
                if md["ownerReferences"] is None:
                    md.pop("ownerReferences")
            if sub == "status":
                kept["status"] = new.get("status", {})
            else:
                kept.setdefault("status", {})["conditions"] = (new.get("status") or {}).get("conditions", [])
            new = kept
            if res.plural == "pods" and (causes := pods.validate_status(new.get("status") or {})):
                raise errors.invalid(res, name, causes)
        elif res.plural in _STATUS_RESET_ON_MAIN:
            if "status" in old:
                new["status"] = old["status"]
            if res.plural in _GENERATION_ON_SPEC and new.get("spec") != old.get("spec"):
                md["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if new == old:  # a no-op write keeps the resourceVersion and sends no event
            return old
        return self.release_finalizers(res.plural, new)

    def release_finalizers(self, plural: str, obj: Json) -> Json:
        """Store `obj`; one being deleted whose grace is over and whose last finalizer is gone goes for good."""
        md = obj["metadata"]
        if md.get("deletionTimestamp") and not md.get("finalizers") and md.get("deletionGracePeriodSeconds") == 0:
            self.store.update(plural, obj)
            return self.store.delete(plural, md.get("namespace", ""), md["name"])
        return self.store.update(plural, obj)

    def _admit_update(self, user: User, res: Resource, old: Json, new: Json, sub: str) -> None:
        node = user.node_name()
        if node is None:
            return
        name = old["metadata"]["name"]
        reason: str | None = None
        if res.plural == "nodes":
            reason = admission.node_write(node, name, old, new)
        elif res.plural == "pods" and sub == "status":
            reason = admission.pod_status(node, old, new)
        elif res.plural == "pods":
            reason = f'node "{node}" can only create and delete mirror pods'
        elif res.plural == "leases":
            reason = admission.lease(node, old["metadata"]["namespace"], name)
        if reason:
            raise errors.forbidden(res, name, reason)

    # delete --------------------------------------------------------------------------------------
    def delete(self, user: User, res: Resource, ns: str, name: str, options: Json) -> Json:
        old = self.get(res, ns, name)
        node = user.node_name()
        if node is not None:
            reason = None
            if res.plural == "pods":
                reason = admission.pod_delete(node, old)
            elif res.plural == "nodes":
                reason = admission.node_write(node, name, old, None)
            elif res.plural == "leases":
                reason = admission.lease(node, ns, name)
            if reason:
                raise errors.forbidden(res, name, reason)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise errors.uid_precondition(res, name, pre["uid"], old["metadata"]["uid"])
        if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise errors.rv_precondition(res, name, pre["resourceVersion"], old["metadata"]["resourceVersion"])
        if res.plural == "pods":
            return self._delete_pod(res, old, options)
        gone = self.store.delete(res.plural, ns, name)
        details: Json = {"name": name}
        if res.group:
            details["group"] = res.group
        details.update({"kind": res.plural, "uid": gone["metadata"]["uid"]})
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _delete_pod(self, res: Resource, pod: Json, options: Json) -> Json:
        """rest.BeforeDelete with podStrategy.CheckGracefulDelete: set deletionTimestamp, then remove
        the object once the grace period is 0 (pod-graceful-delete.json, pod-final-delete-by-node.json)."""
        spec, md = pod.get("spec") or {}, pod["metadata"]
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
            grace = 0
        grace = max(int(grace), 0)
        if md.get("deletionTimestamp") is not None:
            current = md.get("deletionGracePeriodSeconds")
            if current is not None and grace >= current:
                return pod  # graceful deletion is pending: nothing changes
            md["deletionTimestamp"] = _later(grace)
            md["deletionGracePeriodSeconds"] = grace
        else:
            md["deletionTimestamp"] = _later(grace)
            md["deletionGracePeriodSeconds"] = grace
            md["generation"] = int(md.get("generation", 1)) + 1
        updated = self.store.update("pods", pod)
        if grace > 0 or md.get("finalizers"):
            return updated
        return self.store.delete("pods", md["namespace"], md["name"])

    def evict(self, user: User, ns: str, name: str, body: Json) -> Json:
        res = resource("pods")
        pod = self.get(res, ns, name)
        node = user.node_name()
        if node is not None and (reason := admission.pod_eviction(node, pod)):
            raise errors.forbidden(res, name, reason)
        options = (body or {}).get("deleteOptions") or {}
        terminal = (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")
        if (pod.get("spec") or {}).get("nodeName") and not terminal and pod["metadata"].get("deletionTimestamp") is None:
            status = pod.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            conditions.append({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": now_rfc3339(), "reason": "EvictionByEvictionAPI",
                               "message": "Eviction API: evicting"})
            status["conditions"] = conditions
            pod = self.store.update("pods", pod)
        self._delete_pod(res, pod, options)
        return errors.success(201)

    def bind(self, ns: str, name: str, body: Json) -> Json:
        """pods/binding, as the scheduler uses it: spec.nodeName and the PodScheduled condition."""
        res = resource("pods")
        pod = self.get(res, ns, name)
        target = ((body or {}).get("target") or {}).get("name", "")
        if not target:
            cause = {"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}
            raise errors.invalid(res, name, [cause])
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            msg = f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned to node "{current}"'
            raise errors.ApiError(errors.status(409, "Conflict", msg, {"name": name, "kind": "pods/binding"}))
        pod["spec"]["nodeName"] = target
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": now_rfc3339()})
        status["conditions"] = conditions
        self.store.update("pods", pod)
        return errors.success(201)
