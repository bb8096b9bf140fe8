"""minikubelet.worker."""
