"""What the runtime says about one pod: its sandboxes and every container attempt."""

from __future__ import annotations

from dataclasses import dataclass, field

from cri.types import (
    ANNOTATION_HASH,
    ANNOTATION_RESTART_COUNT,
    LABEL_CONTAINER_NAME,
    ContainerState,
    ContainerStatus,
    PodSandboxStatus,
    SandboxState,
)


def restart_count_of(c: ContainerStatus) -> int:
    raw = c.annotations.get(ANNOTATION_RESTART_COUNT, c.labels.get(ANNOTATION_RESTART_COUNT, ""))
    try:
        return int(raw)
    except ValueError:
        return c.metadata.attempt


def name_of(c: ContainerStatus) -> str:
    return c.labels.get(LABEL_CONTAINER_NAME, c.metadata.name)


def hash_of(c: ContainerStatus) -> str:
    return c.annotations.get(ANNOTATION_HASH, c.labels.get(ANNOTATION_HASH, ""))


@dataclass
class PodRuntimeState:
    uid: str
    sandboxes: list[PodSandboxStatus] = field(default_factory=list)  # newest first
    containers: list[ContainerStatus] = field(default_factory=list)  # newest first
    # object id -> clock.monotonic() before the runtime was asked for it (the pod cache's freshness); absent: unknown
    read_at: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sandboxes.sort(key=lambda s: (s.metadata.attempt, s.created_at), reverse=True)
        self.containers.sort(key=lambda c: (restart_count_of(c), c.created_at), reverse=True)

    @property
    def sandbox(self) -> PodSandboxStatus | None:
        return self.sandboxes[0] if self.sandboxes else None

    def attempts(self, name: str) -> list[ContainerStatus]:
        """Every runtime container for this spec container, newest first."""
        return [c for c in self.containers if name_of(c) == name]

    def latest(self, name: str) -> ContainerStatus | None:
        a = self.attempts(name)
        return a[0] if a else None

    def previous(self, name: str) -> ContainerStatus | None:
        a = self.attempts(name)
        return a[1] if len(a) > 1 else None

    def active(self) -> list[ContainerStatus]:
        """Containers of the newest sandbox (upstream PodStatus.ActiveContainerStatuses)."""
        sb = self.sandbox
        return [c for c in self.containers if sb is not None and c.sandbox_id == sb.id]

    def running(self) -> list[ContainerStatus]:
        return [c for c in self.containers if c.state is ContainerState.RUNNING]

    def sandbox_changed(self, host_network: bool) -> tuple[bool, int]:
        """As upstream PodSandboxChanged: (needs a new sandbox, attempt to use)."""
        if not self.sandboxes:
            return True, 0
        newest = self.sandboxes[0]
        ready = [s for s in self.sandboxes if s.state is SandboxState.READY]
        if len(ready) > 1 or newest.state is not SandboxState.READY:
            return True, newest.metadata.attempt + 1
        if not host_network and not newest.ip:
            return True, newest.metadata.attempt + 1
        return False, newest.metadata.attempt
