"""A Mounter that records tmpfs mounts instead of making them (unit tests need no privileges)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from minikubelet.volumes.mounter import MountPoint


class FakeMounter:
    def __init__(self, others: Sequence[MountPoint] = ()) -> None:
        self.mounted: list[tuple[str, tuple[str, ...]]] = []  # (real path, options), in mount order
        self.others = list(others)  # mounts that are not ours
        self.unmounted: list[str] = []

    def mount_tmpfs(self, path: str, options: Sequence[str]) -> None:
        self.mounted.append((os.path.realpath(path), tuple(options)))

    def unmount(self, path: str) -> None:
        for i, (p, _) in enumerate(self.mounted):
            if p == path:
                del self.mounted[i]
                self.unmounted.append(path)
                return
        raise OSError(22, f"unmount {path}: not mounted")

    def mount_points(self) -> list[MountPoint]:
        return [*self.others, *(MountPoint(p, "tmpfs") for p, _ in self.mounted)]
