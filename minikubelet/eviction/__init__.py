"""Node-pressure eviction (upstream pkg/kubelet/eviction): signals, thresholds, ranking, the manager."""
