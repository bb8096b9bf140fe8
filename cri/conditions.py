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


def condition_errors(conditions: list[RuntimeCondition]) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    """(runtime ready, runtime error, network error) as the kubelet's updateRuntimeUp sets them apart in its
    runtimeState (setRuntimeState / setNetworkState): the node's Ready condition lists the runtime's errors
    before the network's. A missing condition counts as not ready (Go prints it `<nil>`)."""
    by_type = {c.type: c for c in conditions}
    network = by_type.get(NETWORK_READY)
    network_errors = () if network is not None and network.status else (
        f"container runtime network not ready: {network if network is not None else '<nil>'}",)
    runtime = by_type.get(RUNTIME_READY)
    runtime_ready = runtime is not None and runtime.status
    runtime_errors = () if runtime_ready else (
        f"container runtime not ready: {runtime if runtime is not None else '<nil>'}",)
    return runtime_ready, runtime_errors, network_errors
