"""Admission of what the Docker Engine cannot give a pod: AppArmor on a host without it, Strict
supplemental groups, user namespaces. Handlers are pure; `host_has_apparmor` reads the host once."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.pod.admission import ADMIT, PodAdmitHandler, PodAdmitResult
from minikubelet.pod.sysctls import SysctlAllowlist

APPARMOR_REASON = "AppArmor"  # upstream lifecycle.AppArmorNotAdmittedReason
POD_FEATURE_UNSUPPORTED_REASON = "PodFeatureUnsupported"
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def host_has_apparmor() -> bool:
    """As runc's apparmor.IsEnabled: the securityfs directory and the module's `enabled` parameter."""
    if not os.path.isdir("/sys/kernel/security/apparmor"):
        return False
    try:
        with open("/sys/module/apparmor/parameters/enabled", "rb") as fh:
            return fh.read(1) == b"Y"
    except OSError:
        return False


def _security_contexts(pod: Pod) -> Iterator[tuple[str, dict[str, Any]]]:
    """(container name, its securityContext) for every container, init containers first."""
    for c in podview.init_containers(pod) + podview.app_containers(pod):
        sc = c.get("securityContext")
        yield str(c.get("name", "")), sc if isinstance(sc, dict) else {}


def _pod_security_context(pod: Pod) -> dict[str, Any]:
    sc = podview.spec(pod).get("securityContext")
    return sc if isinstance(sc, dict) else {}


def _confined(profile: object) -> bool:
    return isinstance(profile, dict) and profile.get("type") != "Unconfined"


class AppArmorAdmitHandler:
    """Upstream appArmorAdmitHandler: a profile other than Unconfined needs AppArmor on the host."""

    def __init__(self, host_enabled: bool) -> None:
        self.host_enabled = host_enabled

    def _required(self, pod: Pod) -> bool:
        if _confined(_pod_security_context(pod).get("appArmorProfile")):
            return True
        if any(_confined(sc.get("appArmorProfile")) for _, sc in _security_contexts(pod)):
            return True
        annotations = podview.meta(pod).get("annotations")
        for key, value in annotations.items() if isinstance(annotations, dict) else ():
            if str(key).startswith(APPARMOR_ANNOTATION_PREFIX):
                return str(value) != "unconfined"
        return False

    def _invalid(self, pod: Pod) -> str:
        pod_level = _pod_security_context(pod).get("appArmorProfile")
        for _, sc in _security_contexts(pod):
            profile = sc.get("appArmorProfile", pod_level)
            if isinstance(profile, dict) and profile.get("type") == "Localhost":
                name = profile.get("localhostProfile")
                if not isinstance(name, str) or not name.strip():
                    return f"invalid empty AppArmor profile name: {profile!r}"
        return ""

    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
        if not self._required(pod):
            return ADMIT
        why = "AppArmor is not enabled on the host" if not self.host_enabled else self._invalid(pod)
        if not why:
            return ADMIT
        return PodAdmitResult(False, APPARMOR_REASON, f"Cannot enforce AppArmor: {why}")


class UserNamespacesAdmitHandler:
    """hostUsers: false needs per-pod user namespaces; Docker's userns-remap is one mapping for the daemon."""

    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
        if podview.spec(pod).get("hostUsers") is not False:
            return ADMIT
        return PodAdmitResult(False, POD_FEATURE_UNSUPPORTED_REASON,
                              "can't set `spec.hostUsers: false`, runtime does not support user namespaces")


def admit_handlers(config: KubeletConfig, predicates: PodAdmitHandler,
                   apparmor: bool | None = None) -> list[PodAdmitHandler]:
    """Every handler in the kubelet's order: sysctls, the node predicates (`predicates`: OS, supplemental groups
    policy, resources, affinity, ports, taints), AppArmor; user namespaces last (upstream fails them when
    creating the sandbox). Raises ValueError for an allowedUnsafeSysctls pattern it cannot use."""
    return [
        SysctlAllowlist.for_node(config.allowed_unsafe_sysctls),
        predicates,
        AppArmorAdmitHandler(host_has_apparmor() if apparmor is None else apparmor),
        UserNamespacesAdmitHandler(),
    ]
