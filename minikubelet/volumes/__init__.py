"""minikubelet.volumes.manager."""
