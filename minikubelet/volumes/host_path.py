"""hostPath volumes (upstream pkg/volume/hostpath): a node path, type-checked, never created below it nor
removed."""

from __future__ import annotations

import os
import stat


class HostPathError(Exception):
    pass


def check_type(path: str, htype: str) -> None:
    exists = os.path.lexists(path)
    if htype == "DirectoryOrCreate":
        if not exists:
            os.makedirs(path, mode=0o755, exist_ok=True)
        elif not os.path.isdir(path):
            raise HostPathError(f"hostPath type check failed: {path} is not a directory")
    elif htype == "FileOrCreate":
        if not exists:
            os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
            with open(path, "a"):
                pass
        elif not os.path.isfile(path):
            raise HostPathError(f"hostPath type check failed: {path} is not a file")
    elif htype:
        modes = {"Directory": stat.S_ISDIR, "File": stat.S_ISREG, "Socket": stat.S_ISSOCK,
                 "CharDevice": stat.S_ISCHR, "BlockDevice": stat.S_ISBLK}
        check = modes.get(htype)
        if check is None:
            raise HostPathError(f"hostPath type {htype!r} is not supported")
        if not exists or not check(os.stat(path).st_mode):
            raise HostPathError(f"hostPath type check failed: {path} is not a {htype}")


def set_up(source: dict[str, object]) -> str:
    path = source.get("path")
    if not isinstance(path, str) or not os.path.isabs(path):
        raise HostPathError("hostPath.path must be an absolute path")
    normalized = os.path.normpath(path)
    check_type(normalized, str(source.get("type") or ""))
    return normalized
