"""Sysctl names: which kernel namespace holds one, and which patterns are valid.

Upstream: component-helpers/node/util/sysctl (namespace.go, sysctl.go) and IsValidSysctlPattern
(pkg/apis/policy/validation).
"""

from __future__ import annotations

import re

SYSCTL_MAX_LENGTH = 253
_SEGMENT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_PATTERN_SEGMENT = "([a-z0-9][-_a-z0-9]*)?[a-z0-9*]"
SYSCTL_PATTERN_FMT = f"({_SEGMENT}[\\./])*{_PATTERN_SEGMENT}"
_PATTERN_RE = re.compile(SYSCTL_PATTERN_FMT)

IPC = "IPC"
NET = "Net"

_BY_NAME = {
    "kernel.sem": IPC,
    "kernel.shmall": IPC,
    "kernel.shmmax": IPC,
    "kernel.shmmni": IPC,
    "kernel.shm_rmid_forced": IPC,
    "kernel.shm": IPC,
    "kernel.msgmax": IPC,
    "kernel.msgmnb": IPC,
    "kernel.msgmni": IPC,
    "kernel.msg": IPC,
}
_BY_PREFIX = {"net": NET, "fs.mqueue": IPC}


def normalize_name(name: str) -> str:
    """`net/ipv4/conf/eno2.100/rp_filter` -> `net.ipv4.conf.eno2/100.rp_filter`: dots separate, slashes do not."""
    first = next((i for i, ch in enumerate(name) if ch in "./"), -1)
    if first == -1 or name[first] == ".":
        return name
    return name.translate(str.maketrans("./", "/."))


def namespace_of(name: str) -> str:
    """IPC, Net, or "" when the sysctl is not known to be namespaced."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    for prefix, ns in _BY_PREFIX.items():
        if name.startswith(prefix + "."):
            return ns
    return ""


def get_namespace(pattern: str) -> tuple[str, str, bool]:
    """(namespace, the name or the prefix before the first '*', whether it is a prefix)."""
    name = normalize_name(pattern)
    star = name.find("*")
    prefixed = star != -1
    if prefixed:
        name = name[:star]
    return namespace_of(name), name, prefixed


def is_valid_sysctl_pattern(pattern: str) -> bool:
    return len(pattern) <= SYSCTL_MAX_LENGTH and _PATTERN_RE.fullmatch(pattern) is not None


def check_allowlist_pattern(pattern: str) -> None:
    """ValueError with upstream's NewAllowlist message for a pattern an allowlist cannot hold."""
    if not is_valid_sysctl_pattern(pattern):
        raise ValueError(
            f'sysctl "{pattern}" must have at most {SYSCTL_MAX_LENGTH} characters and match regex {SYSCTL_PATTERN_FMT}')
    ns, name, _ = get_namespace(pattern)
    if not ns:
        raise ValueError(f'the sysctls "{name}" are not known to be namespaced')
