"""minikubelet.server.app."""
