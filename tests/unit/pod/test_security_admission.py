"""Admission of what the Docker Engine cannot give a pod."""

from __future__ import annotations

from typing import Any

from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.pod.admission import ADMIT, MaxPodsAdmitHandler, PodAdmitResult, can_admit_pod
from minikubelet.pod.security_admission import (
    AppArmorAdmitHandler,
    UserNamespacesAdmitHandler,
    admit_handlers,
)
from minikubelet.pod.sysctls import SysctlAllowlist


def pod(sc: dict[str, Any] | None = None, csc: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "uid": "u", "annotations": annotations or {}},
            "spec": {"securityContext": sc or {}, "containers": [{"name": "c", "securityContext": csc or {}}], **spec}}


NO_APPARMOR = PodAdmitResult(False, "AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host")


def test_apparmor_needs_the_host_unless_unconfined() -> None:
    off = AppArmorAdmitHandler(False)
    assert off.admit(pod(), []) == ADMIT
    assert off.admit(pod({"appArmorProfile": {"type": "Unconfined"}}), []) == ADMIT
    assert off.admit(pod({"appArmorProfile": {"type": "RuntimeDefault"}}), []) == NO_APPARMOR
    assert off.admit(pod(csc={"appArmorProfile": {"type": "Localhost", "localhostProfile": "x"}}), []) == NO_APPARMOR
    assert off.admit(pod(annotations={"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}),
                     []) == NO_APPARMOR
    assert off.admit(pod(annotations={"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}), []) == ADMIT


def test_apparmor_on_the_host_refuses_an_empty_localhost_name() -> None:
    on = AppArmorAdmitHandler(True)
    assert on.admit(pod({"appArmorProfile": {"type": "RuntimeDefault"}}), []) == ADMIT
    r = on.admit(pod(csc={"appArmorProfile": {"type": "Localhost", "localhostProfile": " "}}), [])
    assert (r.admit, r.reason) == (False, "AppArmor") and "invalid empty AppArmor profile name" in r.message


def test_host_users_false_is_refused() -> None:
    h = UserNamespacesAdmitHandler()
    assert h.admit(pod(hostUsers=True), []) == ADMIT and h.admit(pod(), []) == ADMIT
    assert h.admit(pod(hostUsers=False), []) == PodAdmitResult(
        False, "PodFeatureUnsupported", "can't set `spec.hostUsers: false`, runtime does not support user namespaces")


def test_handlers_in_the_kubelets_order() -> None:
    predicates = MaxPodsAdmitHandler(1)
    handlers = admit_handlers(KubeletConfig(allowed_unsafe_sysctls=("kernel.msgmax",)), predicates, apparmor=False)
    assert isinstance(handlers[0], SysctlAllowlist) and handlers[1] is predicates
    bad = pod({"sysctls": [{"name": "kernel.panic", "value": "1"}]})
    assert can_admit_pod(handlers, bad, [pod()]).reason == "SysctlForbidden"
    del bad["spec"]["securityContext"]["sysctls"]
    assert can_admit_pod(handlers, bad, [pod()]).reason == "OutOfpods"
