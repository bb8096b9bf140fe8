"""The runtime over CRI v1 gRPC (containerd, CRI-O): upstream's pkg/kubelet/cri/remote."""

from cri.remote.runtime import DEFAULT_ENDPOINT, RemoteRuntime

__all__ = ["DEFAULT_ENDPOINT", "RemoteRuntime"]
