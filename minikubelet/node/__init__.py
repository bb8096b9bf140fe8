"""minikubelet.node."""
