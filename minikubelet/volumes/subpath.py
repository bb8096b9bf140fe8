"""subPath and subPathExpr of a volumeMount (upstream kubelet_pods.go makeMounts, ExpandContainerVolumeMounts,
and pkg/volume/util/subpath SafeMakeDir / PrepareSafeSubpath): the mounted directory never leaves its volume."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator, Mapping

from minikubelet.api.expansion import expand
from minikubelet.base.goformat import go_quote
from minikubelet.base.safepath import UnsafePathError, make_dirs

log = logging.getLogger("minikubelet.volumes.subpath")


class SubPathError(Exception):
    pass


class _Lookup(Mapping[str, str]):
    """Every $(NAME) is looked up; names with no value or an empty one are collected for the error."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self.missing: set[str] = set()

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        value = self._env.get(key, "")
        if not value:
            self.missing.add(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


def expand_sub_path_expr(expr: str, env: Mapping[str, str]) -> str:
    """$(VAR) from the container's env; a variable that is unset or empty is an error, as upstream."""
    lookup = _Lookup(env)
    expanded = expand(expr, lookup)
    if lookup.missing:
        raise SubPathError(f"missing value for {', '.join(sorted(lookup.missing))}")
    return expanded


def check_sub_path(sub_path: str) -> None:
    if sub_path.startswith("/"):
        raise SubPathError(f"error SubPath `{sub_path}` must not be an absolute path")
    if ".." in sub_path.split("/"):
        raise SubPathError(f"unable to provision SubPath `{sub_path}`: must not contain '..'")


def _within(base: str, path: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _safe_make_dir(volume_path: str, sub_path: str) -> None:
    """Create volume/sub_path: the part that exists must resolve inside the volume, the rest is made without
    following any symlink, with the volume root's permissions."""
    real_base = os.path.realpath(volume_path)
    parts = [p for p in sub_path.split("/") if p not in ("", ".")]
    i = len(parts)
    while i > 0 and not os.path.lexists(os.path.join(volume_path, *parts[:i])):
        i -= 1
    existing = os.path.realpath(os.path.join(volume_path, *parts[:i]))
    if not _within(real_base, existing) or not os.path.isdir(existing):
        raise UnsafePathError(f"{sub_path!r} leaves its volume")
    make_dirs(existing, *parts[i:], mode=stat.S_IMODE(os.stat(volume_path).st_mode))


def resolve(volume_path: str, sub_path: str, mount_name: str, container_name: str) -> str:
    """The host path to bind for volume_path/sub_path, symlinks resolved, refused when outside the volume."""
    check_sub_path(sub_path)
    target = os.path.join(volume_path, sub_path)
    if not os.path.lexists(target):
        try:
            _safe_make_dir(volume_path, sub_path)
        except (OSError, UnsafePathError) as e:
            log.error("cannot create a subPath", extra={"kv": {"volume": volume_path, "subPath": sub_path,
                                                                "err": str(e)}})
            # as upstream, the details (host paths) stay in the agent's log, out of the pod's status
            raise SubPathError(f"failed to create subPath directory for volumeMount {go_quote(mount_name)} of "
                               f"container {go_quote(container_name)}") from e
    real = os.path.realpath(target)
    if not _within(os.path.realpath(volume_path), real) or not os.path.lexists(real):
        log.error("subPath leaves its volume", extra={"kv": {"volume": volume_path, "subPath": sub_path,
                                                             "resolved": real}})
        raise SubPathError(f"failed to prepare subPath for volumeMount {go_quote(mount_name)} of container "
                           f"{go_quote(container_name)}")
    return real
