"""The NodeRestriction admission plugin (plugin/pkg/admission/noderestriction): what a node may write.

Each check returns the reason of a Forbidden, or None; the caller wraps it as
`<resource> "<name>" is forbidden: <reason>` (status-403-node-*.json).
"""

from __future__ import annotations

from typing import Any

from tests.apiserver import pods
from tests.apiserver.authz import pod_references
from tests.apiserver.store import Store

Json = dict[str, Any]
_KUBELET_LABELS = {
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
}
_KUBELET_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _namespace(label: str) -> str:
    return label.split("/", 1)[0] if "/" in label else ""


def _in_domain(ns: str, domain: str) -> bool:
    return ns == domain or ns.endswith("." + domain)


def forbidden_labels(labels: set[str]) -> list[str]:
    out = []
    for label in labels:
        ns = _namespace(label)
        if _in_domain(ns, "node-restriction.kubernetes.io"):
            out.append(label)
        elif (_in_domain(ns, "kubernetes.io") or _in_domain(ns, "k8s.io")) and not (
            label in _KUBELET_LABELS or any(_in_domain(ns, d) for d in _KUBELET_NAMESPACES)
        ):
            out.append(label)
    return sorted(out)


def node_write(node: str, name: str, old: Json | None, new: Json | None) -> str | None:
    if name != node:
        return f'node "{node}" is not allowed to modify node "{name}"'
    if new is None:
        return None
    new_labels = (new.get("metadata") or {}).get("labels") or {}
    if old is None:
        if bad := forbidden_labels(set(new_labels)):
            return f'node "{node}" is not allowed to set the following labels: {", ".join(bad)}'
        return None
    old_labels = (old.get("metadata") or {}).get("labels") or {}
    changed = {k for k in set(old_labels) | set(new_labels) if old_labels.get(k) != new_labels.get(k)}
    if bad := forbidden_labels(changed):
        return f'node "{node}" is not allowed to modify labels: {", ".join(bad)}'
    if (old.get("spec") or {}).get("taints") != (new.get("spec") or {}).get("taints"):
        return f'node "{node}" is not allowed to modify taints'
    return None


def pod_create(node: str, pod: Json, store: Store) -> str | None:
    if not pods.is_mirror(pod):
        return f'pod does not have "{pods.MIRROR_ANNOTATION}" annotation, node "{node}" can only create mirror pods'
    spec = pod.get("spec") or {}
    if spec.get("nodeName") != node:
        return f'node "{node}" can only create pods with spec.nodeName set to itself'
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if len(owners) > 1:
        return f'node "{node}" can only create pods with a single owner reference set to itself'
    if len(owners) == 0:
        return f'node "{node}" can only create pods with an owner reference set to itself'
    owner = owners[0]
    if owner.get("apiVersion") != "v1" or owner.get("kind") != "Node" or owner.get("name") != node:
        return f'node "{node}" can only create pods with an owner reference set to itself'
    if owner.get("controller") is not True:
        return f'node "{node}" can only create pods with a controller owner reference set to itself'
    if owner.get("blockOwnerDeletion") is True:
        return f'node "{node}" must not set blockOwnerDeletion on an owner reference'
    stored = store.get("nodes", "", node)
    if stored is None or stored["metadata"]["uid"] != owner.get("uid"):
        return f'node {node} UID mismatch'
    if spec.get("serviceAccountName"):
        return f'node "{node}" can not create pods that reference a service account'
    refs = pod_references(pod)
    if refs["secrets"] or refs["configmaps"] or refs["persistentvolumeclaims"]:
        return f'node "{node}" can not create pods that reference secrets, configmaps, or persistentvolumeclaims'
    return None


def pod_delete(node: str, pod: Json) -> str | None:
    if (pod.get("spec") or {}).get("nodeName") != node:
        return f'node "{node}" can only delete pods with spec.nodeName set to itself'
    return None


def pod_status(node: str, old: Json, new: Json) -> str | None:
    if (old.get("spec") or {}).get("nodeName") != node:
        return f'node "{node}" can only update pod status for pods with spec.nodeName set to itself'
    if ((old.get("metadata") or {}).get("labels") or {}) != ((new.get("metadata") or {}).get("labels") or {}):
        return f'node "{node}" cannot update labels through pod status'
    return None


def pod_eviction(node: str, pod: Json) -> str | None:
    if (pod.get("spec") or {}).get("nodeName") != node:
        return f'node "{node}" can only evict pods with spec.nodeName set to itself'
    return None


def lease(node: str, namespace: str, name: str) -> str | None:
    if namespace == "kube-node-lease" and name != node:
        return "can only access node lease with the same name as the requesting node"
    return None


def token_request(node: str, request: Json, pod: Json | None, ref: Json) -> str | None:
    """admitServiceAccount plus the ServiceAccountNodeAudienceRestriction check."""
    if ref.get("kind") != "Pod":
        return "node requested token not bound to a pod"
    if pod is None or (pod.get("spec") or {}).get("nodeName") != node:
        return "node requested token bound to a pod scheduled on a different node"
    if ref.get("uid") and ref.get("uid") != pod["metadata"]["uid"]:
        return (f"the UID in the bound object reference ({ref.get('uid')}) does not match the UID in record. "
                "The object might have been deleted and then recreated")
    audiences = (request.get("spec") or {}).get("audiences") or []
    allowed = _token_audiences(pod)
    for aud in audiences:
        if aud not in allowed:
            return (f'audience "{aud}" not found in pod spec volume, system:node:{node} is not authorized '
                    "to request tokens for this audience")
    return None


def _token_audiences(pod: Json) -> set[str]:
    out: set[str] = set()
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        for src in (vol.get("projected") or {}).get("sources") or []:
            token = src.get("serviceAccountToken")
            if token is not None:
                out.add(token.get("audience") or "")
    return out
