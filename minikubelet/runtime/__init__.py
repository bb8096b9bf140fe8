"""The agent's view of the container runtime: per-pod runtime state and the PLEG."""
