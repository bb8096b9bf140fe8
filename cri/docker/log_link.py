"""The kubelet-side log path as a symlink to Docker's json log file (cri-dockerd's behaviour)."""

from __future__ import annotations

import contextlib
import os


def link_log(link: str, target: str) -> None:
    """Replace `link` with a symlink to `target`; skipped when the kubelet made no log directory."""
    if not link or not target or not os.path.isdir(os.path.dirname(link)):
        return
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(target, link)


def unlink_log(link: str) -> None:
    if link and os.path.islink(link):
        with contextlib.suppress(OSError):
            os.remove(link)
