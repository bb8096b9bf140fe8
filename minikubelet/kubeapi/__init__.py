"""minikubelet.kubeapi: the API server client (kubeconfig, REST, watch, strategic merge patches)."""
