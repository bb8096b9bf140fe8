"""minikubelet.pod."""
