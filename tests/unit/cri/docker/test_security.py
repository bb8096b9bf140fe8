"""CRI security contexts -> Docker create fields (cri-dockerd's mapping)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cri.docker.create_config import container_create_body, sandbox_create_body
from cri.docker.security import (
    ConfigError,
    apparmor_security_opt,
    container_security_fields,
    seccomp_security_opt,
    user_spec,
)
from cri.types import (
    UNCONFINED,
    ContainerConfig,
    ContainerMeta,
    LinuxContainerSecurityContext,
    LinuxSandboxSecurityContext,
    PodMeta,
    PodSandboxConfig,
    SecurityProfile,
)

POD = PodMeta("web", "prod", "uid-1", 0)
SANDBOX = PodSandboxConfig(metadata=POD)


@pytest.mark.parametrize(("uid", "name", "gid", "expected"), [
    (None, "", None, ""), (0, "", None, "0"), (1000, "", 3000, "1000:3000"), (None, "nobody", 5, "nobody:5"),
])
def test_user_spec(uid: int | None, name: str, gid: int | None, expected: str) -> None:
    assert user_spec(uid, name, gid) == expected


def test_seccomp_unconfined_is_explicit_and_runtime_default_is_dockers() -> None:
    assert seccomp_security_opt(UNCONFINED) == ["seccomp=unconfined"]
    assert seccomp_security_opt(SecurityProfile("RuntimeDefault")) == []


def test_seccomp_localhost_sends_the_profile_itself(tmp_path: Path) -> None:
    profile = tmp_path / "p.json"
    profile.write_text('{\n  "defaultAction": "SCMP_ACT_ALLOW",  "syscalls": []\n}\n')
    assert seccomp_security_opt(SecurityProfile("Localhost", str(profile))) == [
        'seccomp={"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}']
    missing = tmp_path / "missing.json"
    with pytest.raises(ConfigError, match=f'cannot load seccomp profile "{missing}": No such file or directory'):
        seccomp_security_opt(SecurityProfile("Localhost", str(missing)))
    with pytest.raises(ConfigError, match="must be absolute"):
        seccomp_security_opt(SecurityProfile("Localhost", "p.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="cannot load seccomp profile"):
        seccomp_security_opt(SecurityProfile("Localhost", str(tmp_path / "bad.json")))


def test_apparmor_options() -> None:
    assert apparmor_security_opt(None) == apparmor_security_opt(SecurityProfile("RuntimeDefault")) == []
    assert apparmor_security_opt(UNCONFINED) == ["apparmor=unconfined"]
    assert apparmor_security_opt(SecurityProfile("Localhost", "k8s-x")) == ["apparmor=k8s-x"]


def test_container_fields() -> None:
    sc = LinuxContainerSecurityContext(
        supplemental_groups=(2000, 4000), capabilities_add=("NET_ADMIN",), capabilities_drop=("ALL",),
        no_new_privs=True, masked_paths=("/proc/kcore",), readonly_paths=("/proc/sys",),
        seccomp=SecurityProfile("RuntimeDefault"), readonly_rootfs=True)
    fields = container_security_fields("sb1", sc, SANDBOX)
    assert fields == {
        "Privileged": False, "ReadonlyRootfs": True, "SecurityOpt": ["no-new-privileges"],
        "GroupAdd": ["2000", "4000"], "CapAdd": ["NET_ADMIN"], "CapDrop": ["ALL"],
        "MaskedPaths": ["/proc/kcore"], "ReadonlyPaths": ["/proc/sys"],
    }


def test_masked_paths_unmasked_none_and_privileged() -> None:
    unmasked = container_security_fields("sb1", LinuxContainerSecurityContext(masked_paths=(), readonly_paths=()), SANDBOX)
    assert (unmasked["MaskedPaths"], unmasked["ReadonlyPaths"]) == ([], [])
    assert "MaskedPaths" not in container_security_fields("sb1", LinuxContainerSecurityContext(), SANDBOX)
    privileged = LinuxContainerSecurityContext(privileged=True, masked_paths=("/proc/kcore",), readonly_paths=())
    assert not {"MaskedPaths", "ReadonlyPaths"} & container_security_fields("sb1", privileged, SANDBOX).keys()


@pytest.mark.parametrize(("sandbox", "pid_mode"), [
    (SANDBOX, None),
    (PodSandboxConfig(metadata=POD, share_process_namespace=True), "container:sb1"),
    (PodSandboxConfig(metadata=POD, host_pid=True), "host"),
])
def test_pid_namespace(sandbox: PodSandboxConfig, pid_mode: str | None) -> None:
    body = container_create_body("sb1", ContainerConfig(ContainerMeta("app"), "img"), sandbox)
    assert body["HostConfig"].get("PidMode") == pid_mode
    # the sandbox keeps a PID namespace of its own unless the pod uses the host's
    assert sandbox_create_body(sandbox, "pause")["HostConfig"].get("PidMode") == ("host" if sandbox.host_pid else None)


@pytest.mark.parametrize(("sandbox", "pid_mode"), [
    (SANDBOX, "container:app-id"),
    (PodSandboxConfig(metadata=POD, share_process_namespace=True), "container:sb1"),
    (PodSandboxConfig(metadata=POD, host_pid=True), "host"),
])
def test_ephemeral_pid_target(sandbox: PodSandboxConfig, pid_mode: str) -> None:
    """An ephemeral container's target (CRI NamespaceMode TARGET) joins the target's PID namespace; a pod that
    shares one namespace, or uses the host's, keeps it."""
    config = ContainerConfig(ContainerMeta("dbg"), "img", pid_target_id="app-id")
    assert container_create_body("sb1", config, sandbox)["HostConfig"]["PidMode"] == pid_mode


def test_sandbox_holds_sysctls_and_the_pod_user() -> None:
    config = PodSandboxConfig(metadata=POD, sysctls={"net.ipv4.ip_local_port_range": "1024 2048"},
                              security=LinuxSandboxSecurityContext(privileged=True, run_as_user=10, run_as_group=20,
                                                                   supplemental_groups=(30,)))
    body = sandbox_create_body(config, "pause")
    host = body["HostConfig"]
    assert body["User"] == "10:20"
    assert (host["Sysctls"], host["Privileged"], host["GroupAdd"]) == (
        {"net.ipv4.ip_local_port_range": "1024 2048"}, True, ["30"])
    assert host["SecurityOpt"] == ["no-new-privileges"]
    group_only = sandbox_create_body(
        PodSandboxConfig(metadata=POD, security=LinuxSandboxSecurityContext(run_as_group=20)), "pause")
    assert "User" not in group_only and "Sysctls" not in group_only["HostConfig"]


def test_default_container_is_unconfined_explicitly() -> None:
    body = container_create_body("sb1", ContainerConfig(ContainerMeta("app"), "img"), SANDBOX)
    assert body["HostConfig"]["SecurityOpt"] == ["seccomp=unconfined"]
    assert json.dumps(body)  # a JSON body, as Docker gets it
