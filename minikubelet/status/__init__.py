"""minikubelet.status."""
