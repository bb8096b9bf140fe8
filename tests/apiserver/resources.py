"""The resources this server serves: only those a kubelet reads or writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    # Stored resources are kept and watchable; the others (reviews, token requests) are one-shot.
    stored: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The group-qualified resource name of error messages: `pods`, `leases.coordination.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def gvk(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.kind)


_ALL = [
    Resource("", "v1", "nodes", "Node", False, frozenset({"status"})),
    Resource("", "v1", "pods", "Pod", True, frozenset({"status", "eviction", "binding", "resize", "ephemeralcontainers"})),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, frozenset({"status"})),
    Resource("", "v1", "persistentvolumes", "PersistentVolume", False, frozenset({"status"})),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "services", "Service", True, frozenset({"status"})),
    Resource("", "v1", "events", "Event", True),
    Resource("", "v1", "namespaces", "Namespace", False, frozenset({"status"})),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, frozenset({"token"})),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    # workloads: only their controllers (tests/apiserver/workloads.py) act on them
    Resource("apps", "v1", "deployments", "Deployment", True, frozenset({"status"})),
    Resource("apps", "v1", "replicasets", "ReplicaSet", True, frozenset({"status"})),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, frozenset({"status"})),
    Resource("batch", "v1", "jobs", "Job", True, frozenset({"status"})),
    Resource(
        "certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False,
        frozenset({"status", "approval"}),
    ),
    Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, stored=False),
    Resource("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False, stored=False),
    Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, stored=False),
]

BY_PATH: dict[tuple[str, str, str], Resource] = {(r.group, r.version, r.plural): r for r in _ALL}
BY_PLURAL: dict[str, Resource] = {r.plural: r for r in _ALL}


def resource(plural: str) -> Resource:
    return BY_PLURAL[plural]


# Go's zero value of each kind, as a BOOKMARK object serialises it besides metadata.resourceVersion.
ZERO: dict[str, dict[str, Any]] = {
    "Pod": {"spec": {"containers": None}, "status": {}},
    "Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}, "nodeInfo": {
        "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
        "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "", "operatingSystem": "",
        "architecture": ""}}},
    "Lease": {"spec": {}},
    "Service": {"spec": {}, "status": {"loadBalancer": {}}},
    "CertificateSigningRequest": {"spec": {"request": None, "signerName": ""}, "status": {}},
    "Namespace": {"spec": {}, "status": {}},
    "Event": {"involvedObject": {}, "source": {}, "firstTimestamp": None, "lastTimestamp": None, "eventTime": None,
              "reportingComponent": "", "reportingInstance": ""},
}


