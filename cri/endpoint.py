"""Which API a container runtime endpoint speaks."""

from __future__ import annotations


def speaks_docker_api(endpoint: str) -> bool:
    """A `…/docker.sock` endpoint is the Docker Engine API; anything else is a CRI v1 gRPC endpoint
    (containerd, CRI-O, cri-dockerd). docs/containerd.md"""
    return endpoint.rstrip("/").rsplit("/", 1)[-1] == "docker.sock"
