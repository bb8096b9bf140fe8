"""minikubelet.api."""
