"""Pod QoS, effective resources, OOM score policy, cgroup naming, the v1/v2 drivers and the pod cgroup manager."""
