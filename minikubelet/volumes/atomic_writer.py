"""Atomic writes of a volume's files (upstream pkg/volume/util/atomic_writer.go).

The files live in a timestamped directory `..<UTC time>.<random>`; `..data` is a symlink to it and every
user-visible top-level name is a symlink through `..data`. An update writes a new timestamped directory,
points `..data_tmp` at it and renames that over `..data` (rename(2) is atomic), so a reader sees either
the old set of files or the new one, never a mix. Then the visible links of new names are added, those of
names no longer written are removed, and the old directory goes.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger("minikubelet.volumes.atomic_writer")

DATA_DIR = "..data"
NEW_DATA_DIR = "..data_tmp"
MAX_FILE_NAME_LENGTH = 255
MAX_PATH_LENGTH = 4096


@dataclass(frozen=True)
class FileProjection:
    data: bytes
    mode: int


class AtomicWriteError(Exception):
    pass


def validate_path(target: str) -> None:
    """A payload path: relative, no '..' element, not starting with '..' (the writer's own names)."""
    if target == "":
        raise AtomicWriteError(f'invalid path: must not be empty: "{target}"')
    if target.startswith("/"):
        raise AtomicWriteError(f"invalid path: must be relative path: {target}")
    if len(target) > MAX_PATH_LENGTH:
        raise AtomicWriteError(f"invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters")
    items = target.split("/")
    for item in items:
        if item == "..":
            raise AtomicWriteError(f"invalid path: must not contain '..': {target}")
        if len(item) > MAX_FILE_NAME_LENGTH:
            raise AtomicWriteError(f"invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} "
                                   "characters")
    if items[0].startswith("..") and len(items[0]) > 2:
        raise AtomicWriteError(f"invalid path: must not start with '..': {target}")


def _clean(payload: Mapping[str, FileProjection]) -> dict[str, FileProjection]:
    clean = {}
    for path, projection in payload.items():
        validate_path(path)
        clean[os.path.normpath(path)] = projection
    return clean


def _should_write(payload: Mapping[str, FileProjection], old_dir: str) -> bool:
    """Only content counts, as upstream: a mode change alone is not rewritten."""
    for path, projection in payload.items():
        full = os.path.join(old_dir, path)
        if not os.path.lexists(full):
            return True
        with open(full, "rb") as f:
            if f.read() != projection.data:
                return True
    return False


def _paths_to_remove(payload: Mapping[str, FileProjection], old_dir: str) -> set[str]:
    current: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(old_dir):
        for name in dirnames + filenames:
            current.add(os.path.relpath(os.path.join(dirpath, name), old_dir))
    wanted: set[str] = set()
    for path in payload:
        while path:
            wanted.add(path)
            path = os.path.dirname(path)
    return current - wanted


def _new_timestamp_dir(target_dir: str, now: float) -> str:
    prefix = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime(now))
    ts_dir = tempfile.mkdtemp(prefix=prefix, dir=target_dir)
    os.chmod(ts_dir, 0o755)
    return ts_dir


def _write_payload(payload: Mapping[str, FileProjection], ts_dir: str) -> None:
    for path, projection in payload.items():
        full = os.path.join(ts_dir, path)
        os.makedirs(os.path.dirname(full), mode=0o777, exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, projection.mode)
        try:
            os.write(fd, projection.data)
            os.fchmod(fd, projection.mode)  # the umask must not narrow the mode the pod asked for
        finally:
            os.close(fd)


def write(target_dir: str, payload: Mapping[str, FileProjection],
          set_perms: Callable[[str], None] | None = None, now: Callable[[], float] = time.time) -> bool:
    """Make target_dir show exactly `payload`; True when anything was (re)written.

    set_perms is called with the new timestamped directory's name before it becomes visible.
    """
    clean = _clean(payload)
    data_link = os.path.join(target_dir, DATA_DIR)
    try:
        old_ts = os.readlink(data_link)
    except FileNotFoundError:
        old_ts = ""
    old_path = os.path.join(target_dir, old_ts)
    to_remove: set[str] = set()
    should_write = True
    if old_ts:
        to_remove = _paths_to_remove(clean, old_path)
        if not _should_write(clean, old_path) and not to_remove:
            should_write = False
            old_ts = ""
    if should_write:
        ts_dir = _new_timestamp_dir(target_dir, now())
        ts_name = os.path.basename(ts_dir)
        new_link = os.path.join(target_dir, NEW_DATA_DIR)
        try:
            _write_payload(clean, ts_dir)
            if set_perms is not None:
                set_perms(ts_name)
            if os.path.lexists(new_link):
                os.unlink(new_link)  # left by a write that died between symlink and rename
            os.symlink(ts_name, new_link)
            os.rename(new_link, data_link)
        except BaseException:
            shutil.rmtree(ts_dir, ignore_errors=True)
            if os.path.lexists(new_link):
                os.unlink(new_link)
            raise
    _create_user_visible_files(target_dir, clean)
    _remove_user_visible_paths(target_dir, to_remove)
    if old_ts:
        shutil.rmtree(old_path)
    return should_write


def _create_user_visible_files(target_dir: str, payload: Mapping[str, FileProjection]) -> None:
    for path in payload:
        top = path.split("/", 1)[0]
        visible = os.path.join(target_dir, top)
        if not os.path.lexists(visible):
            os.symlink(os.path.join(DATA_DIR, top), visible)


def _remove_user_visible_paths(target_dir: str, paths: set[str]) -> None:
    last: OSError | None = None
    for path in paths:
        if "/" in path:
            continue
        try:
            os.remove(os.path.join(target_dir, path))
        except OSError as e:
            log.error("cannot prune an old user-visible path", extra={"kv": {"path": path, "err": str(e)}})
            last = e
    if last is not None:
        raise last
