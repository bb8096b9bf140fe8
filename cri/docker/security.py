"""CRI security contexts -> Docker create fields, as cri-dockerd maps them (core/security_context.go)."""

from __future__ import annotations

import json
import os
from typing import Any

from cri.types import LinuxContainerSecurityContext, PodSandboxConfig, SecurityProfile


class ConfigError(ValueError):
    """The CRI config cannot be expressed for Docker."""


def user_spec(run_as_user: int | None, run_as_username: str, run_as_group: int | None) -> str:
    """Docker's `User`: uid or name, then `:gid` when a group is asked for."""
    user = run_as_username or ("" if run_as_user is None else str(run_as_user))
    if run_as_group is None:
        return user
    if not user:
        raise ConfigError("runAsGroup is specified without a runAsUser")
    return f"{user}:{run_as_group}"


def seccomp_security_opt(profile: SecurityProfile) -> list[str]:
    """Unconfined is sent explicitly, or Docker would apply its own default profile."""
    if profile.profile_type == "Unconfined":
        return ["seccomp=unconfined"]
    if profile.profile_type == "RuntimeDefault":
        return []
    if profile.profile_type != "Localhost":
        raise ConfigError(f"unknown seccomp profile option: {profile.profile_type}")
    path = profile.localhost_ref
    if not os.path.isabs(path):
        raise ConfigError(f'seccomp profile path must be absolute, but got relative path "{path}"')
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except OSError as e:
        raise ConfigError(f'cannot load seccomp profile "{path}": {e.strerror or e}') from None
    except ValueError as e:
        raise ConfigError(f'cannot load seccomp profile "{path}": {e}') from None
    # Docker takes the profile itself, not a path.
    return ["seccomp=" + json.dumps(data, separators=(",", ":"))]


def apparmor_security_opt(profile: SecurityProfile | None) -> list[str]:
    if profile is None or profile.profile_type == "RuntimeDefault":
        return []  # Docker applies docker-default where the host has AppArmor
    if profile.profile_type == "Unconfined":
        return ["apparmor=unconfined"]
    return [f"apparmor={profile.localhost_ref}"]


def _groups(groups: tuple[int, ...]) -> list[str]:
    return [str(g) for g in groups]


def sandbox_security_fields(config: PodSandboxConfig) -> dict[str, Any]:
    """HostConfig fields of the pause container: namespaced sysctls live on the namespaces it holds."""
    sc = config.security
    fields: dict[str, Any] = {
        "Privileged": sc.privileged,
        # cri-dockerd's sandbox options: no new privileges, Docker's default seccomp profile
        "SecurityOpt": ["no-new-privileges"],
    }
    if sc.supplemental_groups:
        fields["GroupAdd"] = _groups(sc.supplemental_groups)
    if config.sysctls:
        fields["Sysctls"] = dict(config.sysctls)
    return fields


def sandbox_user(config: PodSandboxConfig) -> str:
    """The pod's runAsUser (and runAsGroup with it); a group alone is left out, the pause image has no user."""
    sc = config.security
    if sc.run_as_user is None:
        return ""
    return user_spec(sc.run_as_user, "", sc.run_as_group)


def container_security_fields(
    sandbox_id: str, sc: LinuxContainerSecurityContext, sandbox_config: PodSandboxConfig, pid_target_id: str = ""
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "Privileged": sc.privileged,
        "ReadonlyRootfs": sc.readonly_rootfs,
        "SecurityOpt": [
            *seccomp_security_opt(sc.seccomp),
            *apparmor_security_opt(sc.apparmor),
            *(["no-new-privileges"] if sc.no_new_privs else []),
        ],
    }
    if sc.supplemental_groups:
        fields["GroupAdd"] = _groups(sc.supplemental_groups)
    if sc.capabilities_add:
        fields["CapAdd"] = list(sc.capabilities_add)
    if sc.capabilities_drop:
        fields["CapDrop"] = list(sc.capabilities_drop)
    if not sc.privileged:
        # [] is sent as is: Docker fills in its defaults only for a missing list
        if sc.masked_paths is not None:
            fields["MaskedPaths"] = list(sc.masked_paths)
        if sc.readonly_paths is not None:
            fields["ReadonlyPaths"] = list(sc.readonly_paths)
    if sandbox_config.host_pid:
        fields["PidMode"] = "host"
    elif sandbox_config.share_process_namespace:
        fields["PidMode"] = f"container:{sandbox_id}"
    elif pid_target_id:  # CRI NamespaceMode TARGET: an ephemeral container joins its target's processes
        fields["PidMode"] = f"container:{pid_target_id}"
    return fields
