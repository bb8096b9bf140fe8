"""Pod networking of a joined node: the pod bridge on the Node's podCIDRs, routes to the other Nodes'
podCIDRs (host-gw), masquerade of traffic leaving the cluster CIDR (docs/cluster.md#pod-networking)."""
