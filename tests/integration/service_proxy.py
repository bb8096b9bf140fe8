"""A stand-in for kube-proxy in the test network namespace: DNAT rules from a Service's ClusterIP:port to one
endpoint, as kube-proxy's iptables mode writes them (KUBE-SERVICES -> KUBE-SEP DNAT), one Service at a time.

The agent has no kube-proxy (nor does a kubelet: kube-proxy is a DaemonSet of its own), so a ClusterIP leads
nowhere unless a test maps it. Pods and the engine's bridge live in the test netns, where pytest runs, so the
rules go into that namespace's nat table. A DNAT to another pod on the same bridge is also masqueraded (the
hairpin case kube-proxy marks with KUBE-MARK-MASQ): otherwise the endpoint answers the client directly over the
bridge, from an address the client never asked. Rules are removed by `close()`.
"""

from __future__ import annotations

import subprocess
from types import TracebackType


def _iptables(*args: str) -> None:
    subprocess.run(["iptables", "-w", "5", "-t", "nat", *args], check=True, capture_output=True)


class ServiceProxy:
    def __init__(self) -> None:
        self._rules: list[tuple[str, ...]] = []

    def _add(self, *rule: str) -> None:
        _iptables("-I", *rule)
        self._rules.append(rule)

    def map(self, cluster_ip: str, port: int, protocol: str, endpoint_ip: str, endpoint_port: int, *,
            masquerade: bool = False) -> None:
        proto = protocol.lower()
        tag = ("-m", "comment", "--comment", f"minikubelet-test {cluster_ip}:{port}/{proto}")
        self._add("PREROUTING", "-d", f"{cluster_ip}/32", "-p", proto, "--dport", str(port), *tag,
                  "-j", "DNAT", "--to-destination", f"{endpoint_ip}:{endpoint_port}")
        if masquerade:
            self._add("POSTROUTING", "-d", f"{endpoint_ip}/32", "-p", proto, "--dport", str(endpoint_port), *tag,
                      "-j", "MASQUERADE")

    def close(self) -> None:
        while self._rules:
            rule = self._rules.pop()
            subprocess.run(["iptables", "-w", "5", "-t", "nat", "-D", *rule], check=False, capture_output=True)

    def __enter__(self) -> ServiceProxy:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
