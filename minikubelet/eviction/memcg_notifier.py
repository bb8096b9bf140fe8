"""Memory threshold notification (upstream memory_threshold_notifier.go, threshold_notifier_linux.go), cgroup v1.

The kernel signals an eventfd once the cgroup's `memory.usage_in_bytes` crosses a value registered through
`cgroup.event_control`, so the eviction manager synchronizes right away instead of up to 10 s later. The
value is capacity − threshold + inactive file pages (usage counts the page cache the working set leaves out),
re-registered as the usage changes. Only the agent's own `kubepods` cgroup is watched
(allocatableMemory.available): the agent registers nothing on cgroups it did not create.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from minikubelet.eviction.thresholds import Threshold

log = logging.getLogger("minikubelet.eviction.memcg")


class ThresholdNotifier:
    def __init__(self, cgroup_dir: Path, threshold: Threshold, on_crossed: Callable[[str], None]) -> None:
        self.cgroup_dir = cgroup_dir
        self.threshold = threshold
        self._on_crossed = on_crossed
        self._eventfd: int | None = None
        self._usage_fd: int | None = None
        self.registered: int | None = None  # the usage value the kernel watches now

    def description(self) -> str:
        return f"{self.threshold.signal}: memcg {self.cgroup_dir}"

    def update(self, pods_memory: Mapping[str, Any]) -> None:
        """Re-register from the `pods` system container's memory stats (Summary API)."""
        try:
            available = int(pods_memory["availableBytes"])
            working_set = int(pods_memory["workingSetBytes"])
            usage = int(pods_memory["usageBytes"])
        except (KeyError, TypeError, ValueError):
            return
        capacity = available + working_set
        inactive_file = max(0, usage - working_set)
        value = capacity - self.threshold.value.amount(capacity) + inactive_file
        if value <= 0 or value == self.registered:
            return
        self.close()
        efd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        try:
            usage_fd = os.open(self.cgroup_dir / "memory.usage_in_bytes", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            os.close(efd)
            raise
        try:
            with open(self.cgroup_dir / "cgroup.event_control", "w") as f:
                f.write(f"{efd} {usage_fd} {value}")
        except OSError:
            os.close(efd)
            os.close(usage_fd)
            raise
        self._eventfd, self._usage_fd, self.registered = efd, usage_fd, value
        asyncio.get_running_loop().add_reader(efd, self._readable)
        log.debug("memcg threshold registered", extra={"kv": {"cgroup": str(self.cgroup_dir), "usage": value}})

    def _readable(self) -> None:
        if self._eventfd is None:
            return
        try:
            os.eventfd_read(self._eventfd)
        except BlockingIOError:
            return
        except OSError as e:
            log.warning("memcg eventfd read failed", extra={"kv": {"err": str(e)}})
            return
        self._on_crossed(f"memcg threshold crossed: {self.description()}")

    def close(self) -> None:
        """Closing the eventfd unregisters the threshold in the kernel."""
        if self._eventfd is not None:
            try:
                asyncio.get_running_loop().remove_reader(self._eventfd)
            except RuntimeError:
                pass
            os.close(self._eventfd)
            self._eventfd = None
        if self._usage_fd is not None:
            os.close(self._usage_fd)
            self._usage_fd = None
        self.registered = None
