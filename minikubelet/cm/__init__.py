"""minikubelet.cm."""
