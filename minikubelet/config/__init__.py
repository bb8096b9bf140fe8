"""minikubelet.config.kubelet_config."""
