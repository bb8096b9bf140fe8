"""The kubelet's security context rules (pure), from pod dicts to CRI security contexts."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cri.types import UNCONFINED, SecurityProfile
from minikubelet.base.podview import PodView
from minikubelet.worker.security_context import (
    DEFAULT_READONLY_PATHS,
    SecurityContextError,
    SecurityOptions,
    container_security,
    default_masked_paths,
    effective_security_context,
    image_user,
    parse_cpu_list,
    pod_sysctls,
    sandbox_security,
    shares_process_namespace,
)

OPTIONS = SecurityOptions(seccomp_default=False, seccomp_root="/var/lib/mkl/seccomp")


def view(pod_sc: dict[str, Any] | None = None, sc: dict[str, Any] | None = None, **spec: Any) -> PodView:
    container: dict[str, Any] = {"name": "app", "image": "busybox"}
    if sc is not None:
        container["securityContext"] = sc
    return PodView.of({"metadata": {"name": "web", "namespace": "ns", "uid": "u1", "annotations": spec.pop("annotations", {})},
                       "spec": {"securityContext": pod_sc or {}, "containers": [container], **spec}})


def security(pod: PodView, user: str = "", options: SecurityOptions = OPTIONS) -> Any:
    return container_security(pod, pod.container("app"), user, options)


def test_container_fields_win_over_the_pod_ones() -> None:
    pod = view({"runAsUser": 1, "runAsGroup": 2, "runAsNonRoot": False}, {"runAsUser": 5, "runAsNonRoot": True})
    sc = effective_security_context(pod, pod.container("app"))
    assert (sc.run_as_user, sc.run_as_group, sc.run_as_non_root) == (5, 2, True)


@pytest.mark.parametrize(("user", "expected"), [
    ("", (0, "")), ("1000", (1000, "")), ("1000:50", (1000, "")), ("nobody", (None, "nobody")),
    ("nobody:nogroup", (None, "nobody")), (":5", (0, "")),
])
def test_image_user_as_cri_dockerd_reports_it(user: str, expected: tuple[int | None, str]) -> None:
    assert image_user(user) == expected


def test_image_user_fills_in_when_no_run_as_user_so_a_group_has_a_user() -> None:
    sc = security(view({"runAsGroup": 7}), "nobody")
    assert (sc.run_as_user, sc.run_as_username, sc.run_as_group) == (None, "nobody", 7)
    sc = security(view({"runAsGroup": 7}), "")
    assert (sc.run_as_user, sc.run_as_username) == (0, "")
    assert security(view({"runAsUser": 9}), "nobody").run_as_username == ""


POD = '"web_ns(u1)"'


@pytest.mark.parametrize(("pod_sc", "sc", "user", "message"), [
    ({"runAsNonRoot": True}, None, "", f"container has runAsNonRoot and image will run as root (pod: {POD}, container: app)"),
    ({"runAsNonRoot": True}, None, "0:0", f"container has runAsNonRoot and image will run as root (pod: {POD}, container: app)"),
    (None, {"runAsNonRoot": True, "runAsUser": 0}, "1000",
     f"container's runAsUser breaks non-root policy (pod: {POD}, container: app)"),
    ({"runAsNonRoot": True}, None, "nobody",
     f"container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root "
     f"(pod: {POD}, container: app)"),
    ({"runAsNonRoot": True}, None, "4294967296",
     "container has runAsNonRoot and image has an invalid user id (4294967296). (Must be 1-(2147483647)): must be "
     f"between 0 and 2147483647, inclusive (pod: {POD}, container: app)"),
])
def test_run_as_non_root_refusals(pod_sc: dict[str, Any] | None, sc: dict[str, Any] | None, user: str,
                                  message: str) -> None:
    with pytest.raises(SecurityContextError) as err:
        security(view(pod_sc, sc), user)
    assert str(err.value) == message


@pytest.mark.parametrize(("pod_sc", "sc", "user"), [
    ({"runAsNonRoot": True}, None, "1000"),
    ({"runAsNonRoot": True, "runAsUser": 1000}, None, ""),
    ({"runAsNonRoot": True}, {"runAsNonRoot": False}, ""),
    ({}, None, "nobody"),
])
def test_run_as_non_root_allows(pod_sc: dict[str, Any], sc: dict[str, Any] | None, user: str) -> None:
    security(view(pod_sc, sc), user)


def test_no_new_privs_only_when_escalation_is_explicitly_refused() -> None:
    assert security(view(sc={"allowPrivilegeEscalation": False})).no_new_privs is True
    assert security(view(sc={"allowPrivilegeEscalation": True})).no_new_privs is False
    assert security(view(sc={})).no_new_privs is False


def test_capabilities_privileged_readonly_pass_through() -> None:
    sc = security(view(sc={"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}, "privileged": True,
                           "readOnlyRootFilesystem": True}))
    assert (sc.capabilities_add, sc.capabilities_drop, sc.privileged, sc.readonly_rootfs) == (
        ("NET_ADMIN",), ("ALL",), True, True)


def test_proc_mount_default_masks_and_unmasked_does_not() -> None:
    default = security(view(sc={}))
    assert default.masked_paths == default_masked_paths() and "/proc/kcore" in default.masked_paths
    assert default.readonly_paths == DEFAULT_READONLY_PATHS
    unmasked = security(view(sc={"procMount": "Unmasked"}))
    assert (unmasked.masked_paths, unmasked.readonly_paths) == ((), ())


def test_supplemental_groups_fs_group_first() -> None:
    pod = view({"fsGroup": 2000, "supplementalGroups": [4000, 5000]})
    assert security(pod).supplemental_groups == (2000, 4000, 5000)
    assert sandbox_security(pod).supplemental_groups == (2000, 4000, 5000)


@pytest.mark.parametrize(("pod_sc", "sc", "options", "expected"), [
    ({}, {}, OPTIONS, UNCONFINED),
    ({}, {}, SecurityOptions(seccomp_default=True), SecurityProfile("RuntimeDefault")),
    ({"seccompProfile": {"type": "RuntimeDefault"}}, {}, OPTIONS, SecurityProfile("RuntimeDefault")),
    ({"seccompProfile": {"type": "RuntimeDefault"}}, {"seccompProfile": {"type": "Unconfined"}}, OPTIONS, UNCONFINED),
    ({}, {"seccompProfile": {"type": "Localhost", "localhostProfile": "prof/a.json"}}, OPTIONS,
     SecurityProfile("Localhost", "/var/lib/mkl/seccomp/prof/a.json")),
])
def test_seccomp_container_then_pod_then_the_node_default(pod_sc: dict[str, Any], sc: dict[str, Any],
                                                          options: SecurityOptions, expected: SecurityProfile) -> None:
    assert security(view(pod_sc, sc), options=options).seccomp == expected


def test_seccomp_localhost_needs_a_profile() -> None:
    with pytest.raises(SecurityContextError, match=re.escape("localhostProfile must be set if seccompProfile type is Localhost.")):
        security(view(sc={"seccompProfile": {"type": "Localhost"}}))


def test_apparmor_field_then_annotation_then_pod() -> None:
    assert security(view()).apparmor is None
    pod_level = view({"appArmorProfile": {"type": "RuntimeDefault"}})
    assert security(pod_level).apparmor == SecurityProfile("RuntimeDefault")
    annotated = view({"appArmorProfile": {"type": "RuntimeDefault"}},
                     annotations={"container.apparmor.security.beta.kubernetes.io/app": "localhost/k8s-x"})
    assert security(annotated).apparmor == SecurityProfile("Localhost", "k8s-x")
    own = view({}, {"appArmorProfile": {"type": "Unconfined"}},
               annotations={"container.apparmor.security.beta.kubernetes.io/app": "runtime/default"})
    assert security(own).apparmor == UNCONFINED


def test_sandbox_security_and_namespaces() -> None:
    pod = PodView.of({"metadata": {"name": "p", "uid": "u"}, "spec": {
        "shareProcessNamespace": True,
        "securityContext": {"runAsUser": 10, "runAsGroup": 20,
                            "sysctls": [{"name": "net/ipv4/ip_local_port_range", "value": "1 2"}]},
        "initContainers": [{"name": "i", "image": "x", "securityContext": {"privileged": True}}],
        "containers": [{"name": "c", "image": "x"}]}})
    sb = sandbox_security(pod)
    assert (sb.privileged, sb.run_as_user, sb.run_as_group) == (True, 10, 20)
    assert pod_sysctls(pod) == {"net.ipv4.ip_local_port_range": "1 2"}
    assert shares_process_namespace(pod) and not shares_process_namespace(view())
    assert not sandbox_security(view()).privileged


@pytest.mark.parametrize(("text", "cpus"), [("0-3\n", [0, 1, 2, 3]), ("0,2-3", [0, 2, 3]), ("7", [7]), ("x", None)])
def test_parse_cpu_list(text: str, cpus: list[int] | None) -> None:
    assert parse_cpu_list(text) == cpus
