"""The runtime on the Docker Engine API (pods as pause-container sandboxes, as cri-dockerd)."""

from cri.docker.runtime import DockerRuntime

__all__ = ["DockerRuntime"]
