"""Optional runtime capability: the pod network on the node's pod CIDRs (CRI `UpdateRuntimeConfig` with
`NetworkConfig.pod_cidr`, which upstream's kubelet calls when its Node gets `spec.podCIDR`).

A runtime that implements `PodNetworkRuntime` gives new pod sandboxes addresses from those CIDRs; until
the first call they use the runtime's default network. The agent checks for it with `isinstance`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class PodNetworkRuntime(Protocol):
    async def update_pod_cidrs(self, cidrs: tuple[str, ...]) -> None:
        """Pod sandboxes created from now on get addresses from `cidrs` (one per IP family).
        Raises `cri.errors.RuntimeError_` when the network cannot be set up."""
