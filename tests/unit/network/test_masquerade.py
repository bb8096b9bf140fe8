from __future__ import annotations

from minikubelet.network.masquerade import COMMENT, rules


def test_pod_traffic_leaving_the_cluster_cidr_is_masqueraded_and_other_nodes_may_reach_the_pods() -> None:
    comment = ["-m", "comment", "--comment", COMMENT]
    assert rules("10.244.1.0/24", "10.244.0.0/16") == [
        ("filter", "FORWARD", ["-d", "10.244.1.0/24", *comment, "-j", "ACCEPT"]),
        ("nat", "POSTROUTING", ["-s", "10.244.1.0/24", "!", "-d", "10.244.0.0/16", *comment, "-j", "MASQUERADE"]),
    ]


def test_an_ipv6_pod_cidr_is_not_masqueraded_by_an_ipv4_non_masquerade_cidr() -> None:
    assert [table for table, _, _ in rules("fd00:10:244:1::/64", "10.0.0.0/8")] == ["filter"]
