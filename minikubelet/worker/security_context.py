"""A container's and a pod sandbox's security settings, as the kubelet derives them.

Upstream: pkg/securitycontext (DetermineEffectiveSecurityContext, AddNoNewPrivileges, masked paths),
kuberuntime/security_context.go and security_context_others.go (verifyRunAsNonRoot), helpers.go
(seccomp, AppArmor, getImageUser), kuberuntime_sandbox.go (generatePodSandboxLinuxConfig).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cri.types import (
    UNCONFINED,
    LinuxContainerSecurityContext,
    LinuxSandboxSecurityContext,
    SecurityProfile,
)
from minikubelet.api.sysctls import normalize_name
from minikubelet.base.podview import ContainerView, PodView
from minikubelet.config.kubelet_config import KubeletConfig

MAX_USER_ID = 2**31 - 1
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
_EMPTY: Mapping[str, Any] = {}

# Docker's defaults plus the kubelet's additions (pkg/securitycontext/util_linux.go).
_BASE_MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
DEFAULT_READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


class SecurityContextError(Exception):
    """The container cannot be configured as its security context asks (-> CreateContainerConfigError)."""


@dataclass(frozen=True)
class SecurityOptions:
    """The node's settings that shape every container's security context."""

    seccomp_default: bool = False  # seccompDefault: RuntimeDefault instead of Unconfined when none is given
    seccomp_root: str = ""  # where Localhost seccomp profiles live: <rootDir>/seccomp

    @classmethod
    def of(cls, config: KubeletConfig) -> SecurityOptions:
        return cls(config.seccomp_default, os.path.join(config.root_dir, "seccomp"))


DEFAULT_OPTIONS = SecurityOptions()


@dataclass(frozen=True)
class EffectiveSecurityContext:
    """The pod's securityContext overlaid with the container's (upstream DetermineEffectiveSecurityContext)."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    privileged: bool = False
    read_only_root_filesystem: bool = False
    allow_privilege_escalation: bool | None = None
    capabilities_add: tuple[str, ...] = ()
    capabilities_drop: tuple[str, ...] = ()
    proc_mount: str = "Default"


def _obj(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, dict) else _EMPTY


def _int(d: Mapping[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bool(d: Mapping[str, Any], key: str) -> bool | None:
    v = d.get(key)
    return v if isinstance(v, bool) else None


def _strs(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    v = d.get(key)
    return tuple(str(x) for x in v) if isinstance(v, list) else ()


def pod_security_context(pod: PodView) -> Mapping[str, Any]:
    return _obj(_obj(pod.raw, "spec"), "securityContext")


def container_security_context(c: ContainerView) -> Mapping[str, Any]:
    return _obj(c.raw, "securityContext")


def effective_security_context(pod: PodView, c: ContainerView) -> EffectiveSecurityContext:
    psc = pod_security_context(pod)
    csc = container_security_context(c)

    def pick(key: str, read: Any) -> Any:
        own = read(csc, key)
        return own if own is not None else read(psc, key)

    caps = csc.get("capabilities")
    caps = caps if isinstance(caps, dict) else _EMPTY
    return EffectiveSecurityContext(
        run_as_user=pick("runAsUser", _int),
        run_as_group=pick("runAsGroup", _int),
        run_as_non_root=pick("runAsNonRoot", _bool),
        # the pod level has none of the fields below
        privileged=_bool(csc, "privileged") is True,
        read_only_root_filesystem=_bool(csc, "readOnlyRootFilesystem") is True,
        allow_privilege_escalation=_bool(csc, "allowPrivilegeEscalation"),
        capabilities_add=_strs(caps, "add"),
        capabilities_drop=_strs(caps, "drop"),
        proc_mount=str(csc.get("procMount") or "Default"),
    )


def image_user(user: str) -> tuple[int | None, str]:
    """(uid, username) of an image's USER: `uid[:gid]` gives the uid, a name gives the name; none means root."""
    name = user.split(":")[0] if user else ""
    if not name:
        return 0, ""
    try:
        return int(name), ""
    except ValueError:
        return None, name


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # Go's %q, for the names a pod can have


def verify_run_as_non_root(pod: PodView, c: ContainerView, sc: EffectiveSecurityContext,
                           uid: int | None, username: str) -> None:
    if not sc.run_as_non_root:
        return
    where = f"(pod: {_q(pod.format_pod)}, container: {c.name})"
    if sc.run_as_user is not None:
        if sc.run_as_user == 0:
            raise SecurityContextError(f"container's runAsUser breaks non-root policy {where}")
        return
    if uid is None and username:
        raise SecurityContextError(
            f"container has runAsNonRoot and image has non-numeric user ({username}), cannot verify user is "
            f"non-root {where}")
    if uid is not None:
        if uid == 0:
            raise SecurityContextError(f"container has runAsNonRoot and image will run as root {where}")
        if not 0 <= uid <= MAX_USER_ID:
            raise SecurityContextError(
                f"container has runAsNonRoot and image has an invalid user id ({uid}). (Must be 1-({MAX_USER_ID})): "
                f"must be between 0 and {MAX_USER_ID}, inclusive {where}")


def _field_seccomp(profile: Mapping[str, Any], root: str) -> SecurityProfile:
    kind = profile.get("type")
    if kind == "RuntimeDefault":
        return SecurityProfile("RuntimeDefault")
    if kind == "Localhost":
        name = profile.get("localhostProfile")
        if not isinstance(name, str) or not name:
            raise SecurityContextError("localhostProfile must be set if seccompProfile type is Localhost.")
        return SecurityProfile("Localhost", os.path.normpath(os.path.join(root, name)))
    return UNCONFINED


def seccomp_profile(pod: PodView, c: ContainerView, options: SecurityOptions) -> SecurityProfile:
    """The container's seccompProfile, else the pod's, else RuntimeDefault with seccompDefault, else Unconfined."""
    for sc in (container_security_context(c), pod_security_context(pod)):
        profile = sc.get("seccompProfile")
        if isinstance(profile, dict):
            return _field_seccomp(profile, options.seccomp_root)
    return SecurityProfile("RuntimeDefault") if options.seccomp_default else UNCONFINED


def _annotation_apparmor(value: str) -> Mapping[str, Any] | None:
    if value == "runtime/default":
        return {"type": "RuntimeDefault"}
    if value == "unconfined":
        return {"type": "Unconfined"}
    if value.startswith("localhost/"):
        return {"type": "Localhost", "localhostProfile": value.removeprefix("localhost/")}
    return None


def apparmor_spec(pod: PodView, c: ContainerView) -> Mapping[str, Any] | None:
    """Upstream apparmor.GetProfile: the container's field, its (deprecated) annotation, then the pod's field."""
    own = container_security_context(c).get("appArmorProfile")
    if isinstance(own, dict):
        return own
    annotation = pod.annotations.get(APPARMOR_ANNOTATION_PREFIX + c.name)
    if annotation is not None:
        from_annotation = _annotation_apparmor(annotation)
        if from_annotation is not None:
            return from_annotation
    pod_level = pod_security_context(pod).get("appArmorProfile")
    return pod_level if isinstance(pod_level, dict) else None


def apparmor_profile(pod: PodView, c: ContainerView) -> SecurityProfile | None:
    spec = apparmor_spec(pod, c)
    if spec is None:
        return None
    kind = spec.get("type")
    if kind in ("RuntimeDefault", "Unconfined"):
        return SecurityProfile(str(kind))
    if kind == "Localhost":
        name = spec.get("localhostProfile")
        if not isinstance(name, str):
            raise SecurityContextError("missing localhost apparmor profile name")
        return SecurityProfile("Localhost", name)
    raise SecurityContextError(f"unknown apparmor profile type: {_q(str(kind))}")


def pod_supplemental_groups(pod: PodView) -> tuple[int, ...]:
    """fsGroup first, then supplementalGroups (the runtime adds the image's own groups: policy Merge)."""
    psc = pod_security_context(pod)
    fs_group = _int(psc, "fsGroup")
    groups = psc.get("supplementalGroups")
    extra = tuple(g for g in groups if isinstance(g, int) and not isinstance(g, bool)) if isinstance(groups, list) else ()
    return ((fs_group,) if fs_group is not None else ()) + extra


def parse_cpu_list(text: str) -> list[int] | None:
    """`0-3,5` -> [0, 1, 2, 3, 5]; None when it cannot be read."""
    cpus: list[int] = []
    try:
        for part in text.strip().split(","):
            lo, sep, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        return None
    return cpus


@functools.cache
def default_masked_paths() -> tuple[str, ...]:
    """Docker's and the kubelet's masked paths, plus each possible CPU's thermal_throttle directory."""
    try:
        with open("/sys/devices/system/cpu/possible") as fh:
            cpus = parse_cpu_list(fh.read())
    except OSError:
        cpus = None
    if cpus is None:
        cpus = list(range(os.cpu_count() or 1))
    throttle = (f"/sys/devices/system/cpu/cpu{cpu}/thermal_throttle" for cpu in cpus)
    return _BASE_MASKED_PATHS + tuple(p for p in throttle if os.path.exists(p))


def container_security(pod: PodView, c: ContainerView, image_user_spec: str,
                       options: SecurityOptions) -> LinuxContainerSecurityContext:
    """Raises SecurityContextError (-> CreateContainerConfigError), runAsNonRoot's refusals included."""
    uid, username = image_user(image_user_spec)
    sc = effective_security_context(pod, c)
    verify_run_as_non_root(pod, c, sc, uid, username)
    unmasked = sc.proc_mount == "Unmasked"
    run_as_user, run_as_username = sc.run_as_user, ""
    if run_as_user is None:
        # the image's own user, resolved here so that runAsGroup always has a user to go with
        run_as_user, run_as_username = uid, username
    return LinuxContainerSecurityContext(
        privileged=sc.privileged,
        run_as_user=run_as_user,
        run_as_username=run_as_username,
        run_as_group=sc.run_as_group,
        supplemental_groups=pod_supplemental_groups(pod),
        readonly_rootfs=sc.read_only_root_filesystem,
        capabilities_add=sc.capabilities_add,
        capabilities_drop=sc.capabilities_drop,
        # only an explicit allowPrivilegeEscalation: false sets no_new_privs
        no_new_privs=sc.allow_privilege_escalation is False,
        masked_paths=() if unmasked else default_masked_paths(),
        readonly_paths=() if unmasked else DEFAULT_READONLY_PATHS,
        seccomp=seccomp_profile(pod, c, options),
        apparmor=apparmor_profile(pod, c),
    )


def sandbox_security(pod: PodView) -> LinuxSandboxSecurityContext:
    psc = pod_security_context(pod)
    return LinuxSandboxSecurityContext(
        privileged=any(c.privileged for c in pod.containers),
        run_as_user=_int(psc, "runAsUser"),
        run_as_group=_int(psc, "runAsGroup"),
        supplemental_groups=pod_supplemental_groups(pod),
    )


def pod_sysctls(pod: PodView) -> dict[str, str]:
    sysctls = pod_security_context(pod).get("sysctls")
    out: dict[str, str] = {}
    for s in sysctls if isinstance(sysctls, list) else ():
        if isinstance(s, dict) and isinstance(s.get("name"), str):
            out[normalize_name(str(s["name"]))] = str(s.get("value", ""))
    return out


def shares_process_namespace(pod: PodView) -> bool:
    return _obj(pod.raw, "spec").get("shareProcessNamespace") is True
