"""Optional runtime capability: CRI `Status`, the runtime's own conditions (RuntimeReady, NetworkReady).

Docker has no such call; a CRI runtime does, and the node's Ready condition follows it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

RUNTIME_READY = "RuntimeReady"
NETWORK_READY = "NetworkReady"


@dataclass(frozen=True)
class RuntimeCondition:
    type: str
    status: bool
    reason: str = ""
    message: str = ""

    def __str__(self) -> str:
        # As the kubelet prints a kubecontainer.RuntimeCondition.
        return f"{self.type}={str(self.status).lower()} reason:{self.reason} message:{self.message}"


@runtime_checkable
class ConditionsRuntime(Protocol):
    async def status(self) -> list[RuntimeCondition]:
        """The runtime's conditions (CRI Status)."""


def condition_errors(conditions: list[RuntimeCondition]) -> tuple[bool, tuple[str, ...]]:
    """(runtime ready, the errors for the node's Ready condition), as the kubelet's updateRuntimeUp sets them:
    the network error, then the runtime's. A missing condition counts as not ready (Go prints it `<nil>`)."""
    by_type = {c.type: c for c in conditions}
    errors = []
    network = by_type.get(NETWORK_READY)
    if network is None or not network.status:
        errors.append(f"container runtime network not ready: {network if network is not None else '<nil>'}")
    runtime = by_type.get(RUNTIME_READY)
    runtime_ready = runtime is not None and runtime.status
    if not runtime_ready:
        errors.append(f"container runtime not ready: {runtime if runtime is not None else '<nil>'}")
    return runtime_ready, tuple(errors)
