"""minikubelet: a Kubernetes node agent in Python."""

__version__ = "0.1.0"
# The Kubernetes minor release whose kubelet semantics this agent follows.
KUBERNETES_VERSION = "v1.36.2"

