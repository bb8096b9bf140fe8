"""Services as the API server keeps them: the `kubernetes` Service of `default` its controller creates at
start-up, and the ClusterIP registry strategy (a cluster IP allocated from the service CIDR, `None` kept for a
headless Service, type and port protocols defaulted)."""

from __future__ import annotations

import ipaddress
from typing import Any

Json = dict[str, Any]

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")  # kubeadm's default --service-cluster-ip-range
KUBERNETES_SERVICE_IP = "10.96.0.1"  # the first address: always the `kubernetes` Service's
SECURE_PORT = 6443


def kubernetes_service() -> Json:
    """What the API server's controller writes (pkg/controlplane/controller/kubernetesservice)."""
    return {
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": SECURE_PORT}],
                 "clusterIP": KUBERNETES_SERVICE_IP, "clusterIPs": [KUBERNETES_SERVICE_IP], "type": "ClusterIP",
                 "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "internalTrafficPolicy": "Cluster"},
        "status": {"loadBalancer": {}},
    }


def prepare_create(obj: Json, used: set[str]) -> Json:
    """Default the spec and allocate a cluster IP (the next free one from .10 on) unless one is given."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    if not spec.get("clusterIP"):
        ip = next(str(a) for a in SERVICE_CIDR.hosts() if int(a) - int(SERVICE_CIDR.network_address) >= 10
                  and str(a) not in used)
        spec["clusterIP"] = ip
    if spec["clusterIP"] != "None":
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    else:
        spec["clusterIPs"] = ["None"]
    spec.setdefault("internalTrafficPolicy", "Cluster")
    obj.setdefault("status", {"loadBalancer": {}})
    return obj
