"""Resource usage of the node, its pods and containers: sampled on the housekeeping interval, served as the
Summary API (/stats/summary), /metrics/resource and /metrics/cadvisor."""
