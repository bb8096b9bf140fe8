"""The sysctl allowlist admission (upstream pkg/kubelet/sysctl): safe sysctls plus allowedUnsafeSysctls."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from minikubelet.api.sysctls import IPC, NET, check_allowlist_pattern, get_namespace, normalize_name
from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.pod.admission import ADMIT, PodAdmitResult

FORBIDDEN_REASON = "SysctlForbidden"

# (sysctl, the first kernel where it is namespaced); upstream safe_sysctls.go
SAFE_SYSCTLS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("kernel.shm_rmid_forced", ()),
    ("net.ipv4.ip_local_port_range", ()),
    ("net.ipv4.tcp_syncookies", ()),
    ("net.ipv4.ping_group_range", ()),
    ("net.ipv4.ip_unprivileged_port_start", ()),
    ("net.ipv4.ip_local_reserved_ports", (3, 16)),
    ("net.ipv4.tcp_keepalive_time", (4, 5)),
    ("net.ipv4.tcp_fin_timeout", (4, 6)),
    ("net.ipv4.tcp_keepalive_intvl", (4, 5)),
    ("net.ipv4.tcp_keepalive_probes", (4, 5)),
    ("net.ipv4.tcp_rmem", (4, 15)),
    ("net.ipv4.tcp_wmem", (4, 15)),
)


def kernel_version(release: str) -> tuple[int, ...] | None:
    """`6.1.0-18-amd64` -> (6, 1, 0); None when it does not start with a version."""
    parts: list[int] = []
    for piece in release.split("-", 1)[0].split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) if parts else None


def safe_sysctl_allowlist(kernel: tuple[int, ...] | None) -> list[str]:
    """The safe sysctls this kernel namespaces; those needing a version are dropped when it is unknown."""
    return [name for name, since in SAFE_SYSCTLS if not since or (kernel is not None and kernel >= since)]


class SysctlAllowlist:
    """Admits a pod whose every sysctl is allowlisted; net/IPC sysctls not with the host's namespace."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self._names: dict[str, str] = {}
        self._prefixes: dict[str, str] = {}
        for pattern in patterns:
            check_allowlist_pattern(pattern)  # ValueError, as upstream's NewAllowlist
            ns, name, prefixed = get_namespace(pattern)
            (self._prefixes if prefixed else self._names)[name] = ns

    @classmethod
    def for_node(cls, allowed_unsafe: Iterable[str], release: str | None = None) -> SysctlAllowlist:
        """The safe sysctls of this host's kernel plus the node's allowedUnsafeSysctls."""
        kernel = kernel_version(release if release is not None else os.uname().release)
        return cls([*safe_sysctl_allowlist(kernel), *allowed_unsafe])

    def validate(self, sysctl: str, host_net: bool, host_ipc: bool) -> str:
        """"" when allowed, else why not."""
        name = normalize_name(sysctl)
        ns = self._names.get(name)
        if ns is None:
            ns = next((ns for prefix, ns in self._prefixes.items() if name.startswith(prefix)), None)
        if ns is None:
            return f'"{name}" not allowlisted'
        if (ns == IPC and host_ipc) or (ns == NET and host_net):
            return f'"{name}" not allowed with host {ns} enabled'
        return ""

    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
        spec = podview.spec(pod)
        sc = spec.get("securityContext")
        sysctls = sc.get("sysctls") if isinstance(sc, dict) else None
        for s in sysctls if isinstance(sysctls, list) else ():
            if not isinstance(s, dict):
                continue
            why = self.validate(str(s.get("name", "")), spec.get("hostNetwork") is True, spec.get("hostIPC") is True)
            if why:
                return PodAdmitResult(False, FORBIDDEN_REASON, f"forbidden sysctl: {why}")
        return ADMIT
