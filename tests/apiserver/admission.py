"""The NodeRestriction admission plugin (plugin/pkg/admission/noderestriction): what a node may write.

Each check returns the reason of a Forbidden, or None; the caller wraps it as
`<resource> "<name>" is forbidden: <reason>` (status-403-node-*.json).
"""

from __future__ import annotations

import base64
from typing import Any

from tests.apiserver import errors, pods
from tests.apiserver.authz import pod_references
from tests.apiserver.pki import csr_subject
from tests.apiserver.resources import resource
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
    """admitNode: create (new, no old), update (both), delete (neither)."""
    if name != node:
        return f'node "{node}" is not allowed to modify node "{name}"'
    if new is None:
        return None
    new_labels = (new.get("metadata") or {}).get("labels") or {}
    new_spec = new.get("spec") or {}
    if old is None:
        if new_spec.get("configSource") is not None:
            return f'node "{node}" is not allowed to create pods with a non-nil configSource'
        if bad := forbidden_labels(set(new_labels)):
            return f'node "{node}" is not allowed to set the following labels: {", ".join(bad)}'
        return None
    old_spec = old.get("spec") or {}
    if new_spec.get("configSource") is not None and new_spec.get("configSource") != old_spec.get("configSource"):
        return f'node "{node}" is not allowed to update configSource to a new non-nil configSource'
    if (old_spec.get("taints") or []) != (new_spec.get("taints") or []):
        return f'node "{node}" is not allowed to modify taints'
    old_labels = (old.get("metadata") or {}).get("labels") or {}
    changed = {k for k in set(old_labels) | set(new_labels) if old_labels.get(k) != new_labels.get(k)}
    if bad := forbidden_labels(changed):
        return f"is not allowed to modify labels: {', '.join(bad)}"  # upstream's message has no node name
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
    if stored is None:
        raise errors.not_found(resource("nodes"), node)
    if stored["metadata"]["uid"] != owner.get("uid"):
        return f"node {node} UID mismatch: expected {owner.get('uid')} got {stored['metadata']['uid']}"
    if spec.get("serviceAccountName"):
        return f'node "{node}" can not create pods that reference a service account'
    refs = pod_references(pod)
    if refs["secrets"]:
        return f'node "{node}" can not create pods that reference secrets'
    if refs["configmaps"]:
        return f'node "{node}" can not create pods that reference configmaps'
    volumes = spec.get("volumes") or []
    if any(src.get("clusterTrustBundle") is not None
           for v in volumes for src in (v.get("projected") or {}).get("sources") or []):
        return f'node "{node}" can not create pods that reference clustertrustbundles'
    if any(v.get("persistentVolumeClaim") is not None for v in volumes):
        return f'node "{node}" can not create pods that reference persistentvolumeclaims'
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
        return f"node {node} can only evict pods with spec.nodeName set to itself"
    return None


def lease(node: str, namespace: str, name: str) -> str | None:
    if namespace != "kube-node-lease":
        return 'can only access leases in the "kube-node-lease" system namespace'
    if name != node:
        return "can only access node lease with the same name as the requesting node"
    return None


def csr(node: str, obj: Json) -> str | None:
    """admitCSR: a node's kubelet CSRs must name the node itself."""
    spec = obj.get("spec") or {}
    if spec.get("signerName") not in ("kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet"):
        return None
    try:
        cn, _ = csr_subject(base64.b64decode(spec.get("request", "")))
    except ValueError as exc:
        return f"unable to parse csr: {exc}"
    if cn != f"system:node:{node}":
        return f"can only create a node CSR with CN=system:node:{node}"
    return None


def token_request(node: str, request: Json, pod: Json | None, ref: Json) -> str | None:
    """admitServiceAccount plus the ServiceAccountNodeAudienceRestriction check."""
    if ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
        return "node requested token not bound to a pod"
    if not ref.get("uid"):
        return "node requested token with a pod binding without a uid"
    if pod is None:
        raise errors.not_found(resource("pods"), ref["name"])
    if ref["uid"] != pod["metadata"]["uid"]:
        return (f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
                "The object might have been deleted and then recreated")
    if (pod.get("spec") or {}).get("nodeName") != node:
        return "node requested token bound to a pod scheduled on a different node"
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
