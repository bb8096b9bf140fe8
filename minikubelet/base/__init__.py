"""minikubelet.base."""
