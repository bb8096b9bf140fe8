"""minikubelet.sources."""
