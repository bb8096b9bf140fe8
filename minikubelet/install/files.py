"""Idempotent file installs: a file is rewritten only when its bytes or mode differ, atomically."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat

from minikubelet.kubeapi.kubeconfig import atomic_write


def install_file(path: str, data: bytes, mode: int = 0o644) -> bool:
    """True when the file changed."""
    try:
        with open(path, "rb") as f:
            same = f.read() == data and stat.S_IMODE(os.fstat(f.fileno()).st_mode) == mode
    except FileNotFoundError:
        same = False
    if same:
        return False
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, data, mode)
    os.chmod(path, mode)
    return True


def remove_path(path: str) -> bool:
    """True when something was removed (a file, a link, or a directory tree)."""
    if os.path.islink(path) or os.path.isfile(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            return True
        return False
    if os.path.isdir(path):
        shutil.rmtree(path)
        return True
    return False
