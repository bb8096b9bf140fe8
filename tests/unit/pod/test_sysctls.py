"""The sysctl allowlist admission and the sysctl name rules it stands on."""

from __future__ import annotations

import re
from typing import Any

import pytest

from minikubelet.api.sysctls import check_allowlist_pattern, get_namespace, normalize_name
from minikubelet.pod.admission import ADMIT, PodAdmitResult
from minikubelet.pod.sysctls import SysctlAllowlist, kernel_version, safe_sysctl_allowlist


def pod(*sysctls: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "uid": "u"},
            "spec": {"securityContext": {"sysctls": [{"name": s, "value": "1"} for s in sysctls]},
                     "containers": [], **spec}}


def forbidden(why: str) -> PodAdmitResult:
    return PodAdmitResult(False, "SysctlForbidden", f"forbidden sysctl: {why}")


def test_safe_sysctls_by_kernel_version() -> None:
    assert len(safe_sysctl_allowlist((6, 1, 0))) == 12
    old = safe_sysctl_allowlist((4, 4))
    assert "net.ipv4.ip_local_reserved_ports" in old and "net.ipv4.tcp_keepalive_time" not in old
    assert safe_sysctl_allowlist(None) == [
        "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"]


@pytest.mark.parametrize(("release", "version"), [
    ("6.1.0-18-amd64", (6, 1, 0)), ("6.18.44-fc-v595", (6, 18, 44)), ("5.15.0+", (5, 15, 0)), ("x", None)])
def test_kernel_version(release: str, version: tuple[int, ...] | None) -> None:
    assert kernel_version(release) == version


def test_safe_admitted_unsafe_refused_with_upstream_message() -> None:
    allow = SysctlAllowlist.for_node([], release="6.1.0")
    assert allow.admit(pod("net.ipv4.ip_local_port_range", "kernel.shm_rmid_forced"), []) == ADMIT
    assert allow.admit(pod(), []) == ADMIT
    assert allow.admit(pod("net.ipv4.ip_local_port_range", "kernel.msgmax"), []) == forbidden(
        '"kernel.msgmax" not allowlisted')
    assert allow.admit(pod("kernel.panic"), []) == forbidden('"kernel.panic" not allowlisted')


def test_allowed_unsafe_patterns_and_host_namespaces() -> None:
    allow = SysctlAllowlist.for_node(["kernel.msg*", "net.core.somaxconn"], release="6.1.0")
    assert allow.admit(pod("kernel.msgmax", "net.core.somaxconn"), []) == ADMIT
    assert allow.admit(pod("net.core.somaxconn", hostNetwork=True), []) == forbidden(
        '"net.core.somaxconn" not allowed with host Net enabled')
    assert allow.admit(pod("kernel.msgmax", hostIPC=True), []) == forbidden(
        '"kernel.msgmax" not allowed with host IPC enabled')
    assert allow.admit(pod("kernel.shm_rmid_forced"), []) == ADMIT


def test_slash_names_are_normalized() -> None:
    assert normalize_name("net/ipv4/conf/eno2.100/rp_filter") == "net.ipv4.conf.eno2/100.rp_filter"
    assert normalize_name("net.ipv4.conf.eno2/100.rp_filter") == "net.ipv4.conf.eno2/100.rp_filter"
    allow = SysctlAllowlist.for_node([], release="6.1.0")
    assert allow.admit(pod("net/ipv4/ip_local_port_range"), []) == ADMIT


@pytest.mark.parametrize(("pattern", "expected"), [
    ("net.*", ("Net", "net.", True)), ("kernel.shm_rmid_forced", ("IPC", "kernel.shm_rmid_forced", False)),
    ("fs.mqueue.*", ("IPC", "fs.mqueue.", True)), ("kernel.panic", ("", "kernel.panic", False)),
])
def test_namespaces(pattern: str, expected: tuple[str, str, bool]) -> None:
    assert get_namespace(pattern) == expected


def test_unusable_patterns_are_refused_with_upstream_messages() -> None:
    with pytest.raises(ValueError, match=re.escape('the sysctls "kernel.panic" are not known to be namespaced')):
        check_allowlist_pattern("kernel.panic")
    with pytest.raises(ValueError, match=re.escape('sysctl "Net.X" must have at most 253 characters and match regex')):
        check_allowlist_pattern("Net.X")
    with pytest.raises(ValueError, match="must have at most 253 characters"):
        check_allowlist_pattern("net." + "a" * 260)
    with pytest.raises(ValueError):
        SysctlAllowlist(["net.core.somaxconn\n"])
