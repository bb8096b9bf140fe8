"""Putting the agent on a machine: `minikubelet join` (discovery, files, the systemd unit) and `minikubelet reset`."""
