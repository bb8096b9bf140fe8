"""Authorization as `--authorization-mode=Node,RBAC` answers a kubelet, a bootstrap user and admins.

The Node authorizer (plugin/pkg/auth/authorizer/node) decides reads of pods, nodes, secrets,
configmaps, PVCs and service account tokens from the graph pod -> node; RBAC's default roles
(system:node, system:node-bootstrapper, system:public-info-viewer) decide the rest. Messages follow
the recorded status-403-*.json bodies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.apiserver.auth import User
from tests.apiserver.store import Store

Json = dict[str, Any]
_READ = ("get", "list", "watch")
_PUBLIC_PATHS = ("/version", "/healthz", "/livez", "/readyz")
_DISCOVERY_PREFIXES = ("/api", "/apis", "/openapi")


@dataclass(frozen=True)
class Attributes:
    user: User
    verb: str
    path: str
    resource: str = ""  # empty: a non-resource request
    subresource: str = ""
    group: str = ""
    namespace: str = ""
    name: str = ""
    fields: dict[str, str] = field(default_factory=dict, hash=False)

    def forbidden_message(self) -> str:
        if not self.resource:
            return f'User "{self.user.name}" cannot {self.verb} path "{self.path}"'
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f'User "{self.user.name}" cannot {self.verb} resource "{res}" in API group "{self.group}" {where}'


def pod_references(pod: Json) -> dict[str, set[str]]:
    """The secrets, configmaps, PVCs and service account a pod references (the Node authorizer's edges)."""
    refs: dict[str, set[str]] = {"secrets": set(), "configmaps": set(), "persistentvolumeclaims": set(),
                                 "serviceaccounts": set()}
    spec = pod.get("spec") or {}
    if spec.get("serviceAccountName"):
        refs["serviceaccounts"].add(spec["serviceAccountName"])
    refs["secrets"].update(s.get("name", "") for s in spec.get("imagePullSecrets") or [])
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or []:
            for env in c.get("env") or []:
                source = env.get("valueFrom") or {}
                if ref := source.get("secretKeyRef"):
                    refs["secrets"].add(ref.get("name", ""))
                if ref := source.get("configMapKeyRef"):
                    refs["configmaps"].add(ref.get("name", ""))
            for env_from in c.get("envFrom") or []:
                if ref := env_from.get("secretRef"):
                    refs["secrets"].add(ref.get("name", ""))
                if ref := env_from.get("configMapRef"):
                    refs["configmaps"].add(ref.get("name", ""))
    for vol in spec.get("volumes") or []:
        if src := vol.get("secret"):
            refs["secrets"].add(src.get("secretName", ""))
        if src := vol.get("configMap"):
            refs["configmaps"].add(src.get("name", ""))
        if src := vol.get("persistentVolumeClaim"):
            refs["persistentvolumeclaims"].add(src.get("claimName", ""))
        if vol.get("ephemeral") is not None:
            refs["persistentvolumeclaims"].add(f"{pod['metadata']['name']}-{vol.get('name', '')}")
        if (src := vol.get("csi")) and (ref := src.get("nodePublishSecretRef")):
            refs["secrets"].add(ref.get("name", ""))
        for proj in (vol.get("projected") or {}).get("sources") or []:
            if src := proj.get("secret"):
                refs["secrets"].add(src.get("name", ""))
            if src := proj.get("configMap"):
                refs["configmaps"].add(src.get("name", ""))
    return refs


class Authorizer:
    def __init__(self, store: Store) -> None:
        self.store = store
        # what a test's ClusterRoleBindings would give: (user or group, API group, resource[/sub], verbs)
        self.grants: list[tuple[str, str, str, tuple[str, ...]]] = []

    def grant(self, subject: str, resource: str, verbs: tuple[str, ...], group: str = "") -> None:
        """Allow `subject` (a user or group name) `verbs` on `resource` (`nodes/log`, `pods/exec`, ...)."""
        self.grants.append((subject, group, resource, verbs))

    def authorize(self, a: Attributes) -> tuple[bool, str]:
        """(allowed, reason): the reason is appended to the 403 message when denied."""
        if "system:masters" in a.user.groups:
            return True, ""
        if not a.resource:
            return self._non_resource(a), ""
        node = a.user.node_name()
        reason = ""
        if node is not None:
            decided, allowed, reason = self._node(node, a)
            if decided:
                return allowed, reason
        return self._rbac(a), reason

    def _non_resource(self, a: Attributes) -> bool:
        if a.verb != "get":
            return False
        if a.path in _PUBLIC_PATHS:
            return True
        authenticated = "system:authenticated" in a.user.groups
        return authenticated and any(a.path == p or a.path.startswith(p + "/") for p in _DISCOVERY_PREFIXES)

    # Node authorizer: (decided, allowed, reason); undecided falls through to RBAC with the reason kept.
    def _node(self, node: str, a: Attributes) -> tuple[bool, bool, str]:
        if a.group == "" and a.resource == "nodes" and not a.subresource and a.verb in _READ:
            if a.name == node:
                return True, True, ""
            # NoOpinion, as upstream: RBAC may still allow it (a ClusterRole like a network add-on's)
            if not a.name:
                return False, False, f"node '{node}' cannot read all nodes, only its own Node object"
            return False, False, f"node '{node}' cannot read '{a.name}', only its own Node object"
        if a.group == "" and a.resource == "pods" and not a.subresource and a.verb in _READ:
            if a.verb == "get":
                return self._graph(node, a)
            if a.fields.get("spec.nodeName") == node:
                return True, True, ""
            return True, False, "can only list/watch pods with spec.nodeName field selector"
        if a.group == "" and a.resource in ("secrets", "configmaps", "persistentvolumeclaims", "persistentvolumes"):
            if a.verb not in _READ:
                return True, False, "can only read resources of this type"
            if a.subresource:
                return True, False, "cannot read subresource"
            return self._graph(node, a)
        if a.group == "" and a.resource == "serviceaccounts" and a.subresource == "token":
            if a.verb != "create":
                return True, False, "can only create tokens for individual service accounts"
            return self._graph(node, a)
        return False, False, ""

    def _graph(self, node: str, a: Attributes) -> tuple[bool, bool, str]:
        if not a.name:
            return True, False, "No Object name found"
        if a.resource == "pods":  # the pod's own edge to its node: only the named pod is read
            named = self.store.get("pods", a.namespace, a.name)
            if named is not None and (named.get("spec") or {}).get("nodeName") == node:
                return True, True, ""
            return True, False, f"no relationship found between node '{node}' and this object"
        for pod in self.store.list_objects("pods", a.namespace or None):
            if (pod.get("spec") or {}).get("nodeName") != node:
                continue
            refs = pod_references(pod)
            if a.name in refs.get(a.resource, set()):
                return True, True, ""
            if a.resource == "persistentvolumes" and a.name in self._volumes_of(pod, refs):
                return True, True, ""
        return True, False, f"no relationship found between node '{node}' and this object"

    def _volumes_of(self, pod: Json, refs: dict[str, set[str]]) -> set[str]:
        """The PersistentVolumes bound to the pod's claims (the graph's pvc -> pv edges)."""
        ns = pod["metadata"].get("namespace", "")
        claims = (self.store.get("persistentvolumeclaims", ns, c) for c in refs["persistentvolumeclaims"])
        return {str((c.get("spec") or {}).get("volumeName")) for c in claims if c is not None}

    def _rbac(self, a: Attributes) -> bool:
        # kubeadm's Role kubeadm:bootstrap-signer-clusterinfo, bound to User system:anonymous (token discovery)
        if (a.user.name == "system:anonymous" and a.group == "" and a.resource == "configmaps" and not a.subresource
                and a.verb == "get" and a.namespace == "kube-public" and a.name == "cluster-info"):
            return True
        groups = set(a.user.groups)
        rules: list[tuple[str, str, tuple[str, ...]]] = []  # (group, resource[/sub], verbs)
        if "system:nodes" in groups:
            rules += _NODE_RULES
        if "system:nodes" in groups or "system:bootstrappers" in groups:
            rules.append(("certificates.k8s.io", "certificatesigningrequests", ("create", "get", "list", "watch")))
        res = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        subjects = {a.user.name, *groups}
        rules += [(g, r, verbs) for who, g, r, verbs in self.grants if who in subjects]
        if "system:authenticated" in groups:
            rules += _BASIC_USER_RULES
        return any(g == a.group and r == res and a.verb in verbs for g, r, verbs in rules)


_NODE_RULES: list[tuple[str, str, tuple[str, ...]]] = [
    ("", "nodes", ("create", "update", "patch", "delete")),
    ("", "nodes/status", ("update", "patch")),
    ("", "pods", ("create", "delete")),
    ("", "pods/status", ("update", "patch")),
    ("", "pods/eviction", ("create",)),
    ("", "events", ("create", "update", "patch")),
    ("", "services", ("get", "list", "watch")),
    ("coordination.k8s.io", "leases", ("get", "create", "update", "patch", "delete")),
    ("authentication.k8s.io", "tokenreviews", ("create",)),
    ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
]

# the ClusterRole system:basic-user, bound to the group system:authenticated (the part this server serves)
_BASIC_USER_RULES: list[tuple[str, str, tuple[str, ...]]] = [
    ("authentication.k8s.io", "selfsubjectreviews", ("create",)),
]
