"""`pods/resize` as kube-apiserver 1.36 serves it (pkg/registry/core/pod/strategy.go podResizeStrategy,
pkg/apis/core/validation ValidatePodResize), with InPlacePodVerticalScaling (GA),
InPlacePodVerticalScalingInitContainers and InPlacePodLevelResourcesVerticalScaling (beta, on) as 1.36 has them.

Only `resources` and `resizePolicy` of the containers and init containers (and the pod-level `spec.resources`)
are taken from the request; everything else is the stored pod's. A spec change bumps `metadata.generation`.
"""

from __future__ import annotations

import copy
from typing import Any

from cgroups.qos import compute_qos_class, qos_class
from minikubelet.api.defaults import apply_defaults
from minikubelet.base.podview import PodView
from minikubelet.base.quantity import parse_quantity
from tests.apiserver import pods

Json = dict[str, Any]
_CPU_MEMORY = ("cpu", "memory")
# ObjectMeta fields a status-like write cannot change (ResetObjectMetaForStatus)
_META_FROM_OLD = ("deletionTimestamp", "generation", "labels", "annotations", "finalizers", "ownerReferences",
                  "managedFields")


def _forbidden(field: str, detail: str) -> Json:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def _invalid(field: str, value: str, detail: str) -> Json:
    return {"reason": "FieldValueInvalid", "message": f'Invalid value: "{value}": {detail}', "field": field}


def _res(c: Json) -> Json:
    r = c.get("resources")
    return r if isinstance(r, dict) else {}


def _containers(spec: Json, key: str) -> list[Json]:
    cs = spec.get(key)
    return [c for c in cs if isinstance(c, dict)] if isinstance(cs, list) else []


def _merge_resize_fields(new: list[Json], old: list[Json]) -> list[Json]:
    """dropNonResizeUpdatesForContainers: the stored containers with the request's resources and resize policy;
    a renamed or reordered list is returned as sent, for the validation to refuse."""
    if not new:
        return new
    merged = copy.deepcopy(old)
    for i, c in enumerate(new):
        if merged[i].get("name") != c.get("name"):
            return new
        for key in ("resources", "resizePolicy"):
            merged[i].pop(key, None)
            if key in c:
                merged[i][key] = copy.deepcopy(c[key])
    return merged


def prepare_update(new: Json, old: Json) -> Json:
    """podResizeStrategy.PrepareForUpdate: dropNonResizeUpdates, then the generation bump."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    out = copy.deepcopy(old)
    md = out["metadata"]
    for key, value in (new.get("metadata") or {}).items():
        if key not in _META_FROM_OLD:
            md[key] = copy.deepcopy(value)
    if (len(_containers(new_spec, "containers")) != len(_containers(old_spec, "containers"))
            or len(_containers(new_spec, "initContainers")) != len(_containers(old_spec, "initContainers"))):
        # containers added or removed: the request's spec as sent, for the validation to refuse
        out["spec"] = copy.deepcopy(new_spec)
    else:
        spec = out.setdefault("spec", {})
        spec["containers"] = _merge_resize_fields(_containers(new_spec, "containers"),
                                                  _containers(old_spec, "containers"))
        if "initContainers" in old_spec or "initContainers" in new_spec:
            spec["initContainers"] = _merge_resize_fields(_containers(new_spec, "initContainers"),
                                                          _containers(old_spec, "initContainers"))
        spec.pop("resources", None)
        if new_spec.get("resources") is not None:
            spec["resources"] = copy.deepcopy(new_spec["resources"])
    # the decoder defaults what it decodes (a request from a limit alone, ...)
    out = apply_defaults(out)
    out["metadata"] = md
    if out.get("spec") != old.get("spec"):
        md["generation"] = int(old["metadata"].get("generation", 1)) + 1
    return out


def _resources_removed(new: Any, old: Any) -> bool:
    new = new if isinstance(new, dict) else {}
    old = old if isinstance(old, dict) else {}
    return len(old) > len(new) or any(name not in new for name in old)


def _same_quantities(a: Any, b: Any) -> bool:
    a = a if isinstance(a, dict) else {}
    b = b if isinstance(b, dict) else {}
    if set(a) != set(b):
        return False
    try:
        return all(parse_quantity(a[k]) == parse_quantity(b[k]) for k in a)
    except ValueError:
        return bool(a == b)


def _drop_cpu_memory_updates(new: Any, old: Any) -> Json | None:
    """dropCPUMemoryUpdates: the list with cpu and memory taken from the old one."""
    old = old if isinstance(old, dict) else None
    if not isinstance(new, dict):
        if old is None:
            return None
        new = {}
    out = {k: v for k, v in new.items() if k not in _CPU_MEMORY}
    for k in _CPU_MEMORY:
        if old is not None and k in old:
            out[k] = old[k]
    return out


def _without_cpu_memory_changes(c: Json, old: Json) -> Json:
    """dropCPUMemoryResourcesFromContainer: the container as it would be without its cpu/memory changes."""
    res, old_res = _res(c), _res(old)
    lim = _drop_cpu_memory_updates(res.get("limits"), old_res.get("limits"))
    req = _drop_cpu_memory_updates(res.get("requests"), old_res.get("requests"))
    out = dict(c)
    resources = {k: v for k, v in res.items() if k not in ("limits", "requests")}
    if lim is not None:
        resources["limits"] = lim
    if req is not None:
        resources["requests"] = req
    out["resources"] = resources
    return out


def _containers_equal(a: Json, b: Json) -> bool:
    """Semantic equality of two containers: quantities compare by value, an empty list as an absent one."""
    ra, rb = _res(a), _res(b)
    rest_a = {k: v for k, v in a.items() if k != "resources"}
    rest_b = {k: v for k, v in b.items() if k != "resources"}
    return rest_a == rest_b and all(_same_quantities(ra.get(k), rb.get(k)) for k in ("limits", "requests")) \
        and ra.get("claims") == rb.get("claims")


def _is_sidecar(c: Json) -> bool:
    return c.get("restartPolicy") == "Always"


def _resize_supported(old: Json) -> bool:
    """isPodResizeRequestSupported: a node that reports `resources` on its running containers can resize."""
    for cs in (old.get("status") or {}).get("containerStatuses") or []:
        if isinstance(cs, dict) and "running" in (cs.get("state") or {}):
            return cs.get("resources") is not None
    return True


def _pod_level_set(spec: Json) -> bool:
    res = spec.get("resources")
    return isinstance(res, dict) and bool(len(res.get("requests") or {}) + len(res.get("limits") or {}))


def _validate_pod_level(new_spec: Json, old_spec: Json) -> list[Json]:
    """validatePodLevelResourcesResize."""
    errs: list[Json] = []
    old_res, new_res = old_spec.get("resources"), new_spec.get("resources")
    if isinstance(old_res, dict) and not isinstance(new_res, dict):
        return [_forbidden("spec.resources", "pod-level resources cannot be removed")]
    if isinstance(old_res, dict) and isinstance(new_res, dict):
        if _resources_removed(new_res.get("requests"), old_res.get("requests")):
            errs.append(_forbidden("spec.resources.requests", "pod-level resource requests cannot be removed"))
        if _resources_removed(new_res.get("limits"), old_res.get("limits")):
            errs.append(_forbidden("spec.resources.limits", "pod-level resource limits cannot be removed"))
    masked = _without_cpu_memory_changes({"resources": new_res or {}}, {"resources": old_res or {}})["resources"]
    if not isinstance(old_res, dict) and not masked.get("requests") and not masked.get("limits") \
            and not masked.get("claims"):
        masked = None
    if not _same_pod_resources(masked, old_res):
        errs.append(_forbidden("spec", "only cpu and memory resources are mutable at pod-level"))
    return errs


def _same_pod_resources(a: Any, b: Any) -> bool:
    if not isinstance(a, dict) or not isinstance(b, dict):
        return bool(a == b)
    return _containers_equal({"resources": a}, {"resources": b})


def validate(new: Json, old: Json) -> list[Json]:
    """ValidatePodResize: the causes of a 422, in upstream's order."""
    errs = pods.validate_create(new)
    annotations = (old.get("metadata") or {}).get("annotations") or {}
    if pods.MIRROR_ANNOTATION in annotations:
        return [_forbidden("", "static pods cannot be resized")]
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if ((old_spec.get("os") or {}).get("name")) == "windows":
        return [_forbidden("", "windows pods cannot be resized")]
    if qos_class(PodView.of(old)) != compute_qos_class(PodView.of(new)):
        errs.append(_invalid("spec", str((new.get("status") or {}).get("qosClass") or ""),
                             "Pod QOS Class may not change as a result of resizing"))
    if not _resize_supported(old):
        errs.append(_forbidden("spec", "Pod running on node without support for resize"))
    if _pod_level_set(old_spec) or _pod_level_set(new_spec):
        errs += _validate_pod_level(new_spec, old_spec)
    if (old.get("status") or {}).get("nodeAllocatableResourceClaimStatuses"):
        errs.append(_forbidden("spec", "pods with node allocatable resource claims cannot be resized"))
    order = _ordering_errors(new_spec, old_spec)
    if order:
        return errs + order
    for key in ("initContainers", "containers"):
        for i, (nc, oc) in enumerate(zip(_containers(new_spec, key), _containers(old_spec, key), strict=True)):
            nres, ores = _res(nc), _res(oc)
            path = f"spec.{key}[{i}].resources"
            if _resources_removed(nres.get("requests"), ores.get("requests")):
                errs.append(_forbidden(f"{path}.requests", "resource requests cannot be removed"))
            if _resources_removed(nres.get("limits"), ores.get("limits")):
                errs.append(_forbidden(f"{path}.limits", "resource limits cannot be removed"))
    masked_containers = []
    for nc, oc in zip(_containers(new_spec, "containers"), _containers(old_spec, "containers"), strict=True):
        masked = _without_cpu_memory_changes(nc, oc)
        if not _containers_equal(masked, oc):
            errs.append(_forbidden("spec", "only cpu and memory resources are mutable"))
        masked_containers.append(masked)
    masked_inits = []
    for i, (nc, oc) in enumerate(zip(_containers(new_spec, "initContainers"), _containers(old_spec, "initContainers"),
                                     strict=True)):
        modified = nc != oc
        masked = _without_cpu_memory_changes(nc, oc)
        if not _containers_equal(masked, oc):
            errs.append(_forbidden(f"spec.initContainers[{i}]",
                                   "only cpu and memory resources for init or sidecar containers are mutable"))
        if modified and not _is_sidecar(nc) and any(
                isinstance(p, dict) and p.get("restartPolicy") == "RestartContainer"
                for p in nc.get("resizePolicy") or []):
            errs.append(_forbidden(f"spec.initContainers[{i}]",
                                   "non-sidecar init containers with a resize policy of RestartContainer cannot be "
                                   "resized"))
        masked_inits.append(masked)
    if errs:
        return errs
    # everything but cpu and memory (of the containers and the pod) must be as it was
    rest_new = {k: v for k, v in new_spec.items() if k not in ("containers", "initContainers", "resources")}
    rest_old = {k: v for k, v in old_spec.items() if k not in ("containers", "initContainers", "resources")}
    same = rest_new == rest_old and all(
        _containers_equal(a, b) for a, b in zip(masked_containers, _containers(old_spec, "containers"), strict=True)
    ) and all(_containers_equal(a, b) for a, b in zip(masked_inits, _containers(old_spec, "initContainers"),
                                                        strict=True))
    if not same:
        errs.append(_forbidden("spec", "only cpu and memory resources are mutable"))
    return errs


def _ordering_errors(new_spec: Json, old_spec: Json) -> list[Json]:
    """validatePodResizeContainerOrdering: no container added, removed, renamed or reordered."""
    errs: list[Json] = []
    for key, noun in (("containers", "containers"), ("initContainers", "initContainers")):
        new, old = _containers(new_spec, key), _containers(old_spec, key)
        if len(new) != len(old):
            errs.append(_forbidden(f"spec.{key}", f"{noun} may not be added or removed on resize"))
            continue
        for i, (n, o) in enumerate(zip(new, old, strict=True)):
            if n.get("name") != o.get("name"):
                errs.append(_forbidden(f"spec.{key}[{i}].name", f"{noun} may not be renamed or reordered on resize"))
    return errs
