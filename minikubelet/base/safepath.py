"""Host paths built from identifiers (pod uid, names, restart counts) that cannot leave their parent.

Identifiers come from manifests, so each one is checked to be a single path component before it is
joined. Creation and removal then walk the path one component at a time through directory file
descriptors opened with O_NOFOLLOW: a symlink planted anywhere below the trusted base (the agent's
root dir) is refused instead of followed, and removal never crosses into another mount (a bind
mount inside a pod dir would otherwise have its host contents deleted).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(ValueError):
    """An identifier is not a single, harmless path component, or a path escapes its parent."""


def safe_component(value: object, what: str = "path component") -> str:
    """value as one path component; refuses empty, ".", "..", "/" and NUL (and non-strings)."""
    if not isinstance(value, str) or value in ("", ".", "..") or "/" in value or "\0" in value:
        raise UnsafePathError(f"{what} {value!r} cannot be used in a host path")
    return value


def safe_join(base: str, *parts: object) -> str:
    """base/part/...: every part a single safe component, the result strictly below base."""
    checked = [safe_component(p) for p in parts]
    root = os.path.normpath(os.path.abspath(base))
    joined = os.path.normpath(os.path.join(root, *checked))
    if checked and (joined == root or os.path.commonpath([root, joined]) != root):
        raise UnsafePathError(f"{joined!r} is not below {root!r}")
    return joined


@contextmanager
def _open_dir(base: str, parts: list[str], *, create: bool, mode: int = 0o755) -> Iterator[int]:
    """A directory fd for base/parts, reached without following any symlink below base."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePathError(f"{os.path.join(base, *parts)}: {part!r} is a symlink or not a directory") \
                        from e
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def make_dirs(base: str, *parts: object, mode: int = 0o755, leaf_mode: int | None = None) -> str:
    """Create base/parts (base must exist); an existing symlink on the way is refused, never followed.

    leaf_mode is set on the last directory regardless of the umask (emptyDir wants 0777).
    """
    checked = [safe_component(p) for p in parts]
    with _open_dir(base, checked, create=True, mode=mode) as fd:
        if leaf_mode is not None:
            os.fchmod(fd, leaf_mode)
    return safe_join(base, *checked)


def create_file(base: str, *parts: object, mode: int = 0o666) -> str:
    """Create (or truncate) the regular file base/parts, making its directories; refuses symlinks. The file gets
    exactly `mode`, whatever the umask."""
    checked = [safe_component(p) for p in parts]
    if not checked:
        raise UnsafePathError("no file name")
    with _open_dir(base, checked[:-1], create=True) as dir_fd:
        flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(checked[-1], flags, mode, dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafePathError(f"{checked[-1]!r} is a symlink") from e
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafePathError(f"{checked[-1]!r} is not a regular file")
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    return safe_join(base, *checked)


def mount_points(mountinfo: Path = MOUNTINFO) -> list[str]:
    points = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.append(fields[4].encode().decode("unicode_escape"))
    return points


def remove_tree(base: str, *parts: object, mountinfo: Path = MOUNTINFO, mounts: Iterable[str] | None = None) -> bool:
    """Remove base/parts and everything below it; True when it is gone (or never existed).

    Symlinks inside are removed as links, never followed. Anything mounted at or below the tree,
    or on another device, is left alone (and the tree then stays, so the caller can retry later).
    `mounts`: the mount points, when the caller has just read them (else `mountinfo` is read).
    """
    if not parts:
        raise UnsafePathError("refusing to remove the base directory itself")
    target = safe_join(base, *parts)
    checked = [safe_component(p) for p in parts]
    real_base = os.path.realpath(base)
    real_target = os.path.join(real_base, *checked)
    if mounts is None:
        mounts = mount_points(mountinfo)
    if any(p == real_target or p.startswith(real_target + "/") for p in mounts):
        return False
    try:
        with _open_dir(base, checked[:-1], create=False) as parent_fd:
            st = os.stat(checked[-1], dir_fd=parent_fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(checked[-1], dir_fd=parent_fd)
                return True
            complete = _remove_contents(parent_fd, checked[-1], st.st_dev)
            if complete:
                os.rmdir(checked[-1], dir_fd=parent_fd)
            return complete
    except FileNotFoundError:
        return not os.path.lexists(target)


def _remove_contents(parent_fd: int, name: str, dev: int) -> bool:
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    complete = True
    try:
        if os.fstat(fd).st_dev != dev:
            return False
        for entry in list(os.scandir(fd)):
            try:
                if entry.is_dir(follow_symlinks=False):
                    if _remove_contents(fd, entry.name, dev):
                        os.rmdir(entry.name, dir_fd=fd)
                    else:
                        complete = False
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                pass
    finally:
        os.close(fd)
    return complete


def unescape_mount_field(field: str) -> str:
    """A path or device of a mount table (mounts, mountinfo): the kernel writes space, tab, newline and backslash
    as \\ooo octal escapes."""
    return field.encode().decode("unicode_escape").encode("latin-1").decode(errors="surrogateescape")
