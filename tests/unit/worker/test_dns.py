"""The pod's resolver config: policies, spec.dnsConfig, the limits and their events (upstream dns.go)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cri.types import DNSConfig
from minikubelet.base.podview import PodView
from minikubelet.worker.dns import (
    DNS_CONFIG_FORMING,
    MISSING_CLUSTER_DNS,
    DNSError,
    DNSSettings,
    cluster_searches,
    parse_resolv_conf,
    pod_dns,
    read_host_dns,
)

HOST = DNSConfig(("192.0.2.1", "192.0.2.2"), ("corp.example", "example"), ("timeout:2", "rotate"))
CLUSTER = DNSSettings(("10.96.0.10",), "cluster.local", "/etc/resolv.conf")
CLUSTER_SEARCH = ("prod.svc.cluster.local", "svc.cluster.local", "cluster.local")


def pod(**spec: Any) -> PodView:
    return PodView.of({
        "metadata": {"name": "web", "namespace": "prod", "uid": "u1"},
        "spec": {"dnsPolicy": "ClusterFirst", "containers": [{"name": "c", "image": "i"}], **spec},
    })


def test_parse_resolv_conf() -> None:
    text = """# comment
nameserver 192.0.2.1
 nameserver 192.0.2.2   # trailing words are ignored
search first.example
search corp.example. example .
options ndots:2 timeout:1
options ndots:3 rotate
domain ignored.example
"""
    assert parse_resolv_conf(text) == DNSConfig(
        ("192.0.2.1", "192.0.2.2"), ("corp.example", "example"), ("ndots:3", "timeout:1", "rotate"))
    assert parse_resolv_conf("") == DNSConfig()


def test_a_nameserver_line_without_address_is_an_error() -> None:
    with pytest.raises(DNSError, match=r"^nameserver list is empty $"):
        parse_resolv_conf("nameserver 192.0.2.1\nnameserver\n")


def test_read_host_dns(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 192.0.2.9\nsearch lab.example\n")
    assert read_host_dns(str(conf)) == DNSConfig(("192.0.2.9",), ("lab.example",), ())
    assert read_host_dns("") == DNSConfig()
    with pytest.raises(DNSError, match=r"^open .*/missing: no such file or directory$"):
        read_host_dns(str(tmp_path / "missing"))
    conf.write_text("nameserver\n")
    with pytest.raises(DNSError, match=r"^Encountered error while parsing resolv conf file\. Error: nameserver list"):
        read_host_dns(str(conf))


def test_cluster_first_uses_only_the_cluster_servers_and_searches_the_cluster_first() -> None:
    result = pod_dns(pod(), CLUSTER, HOST)
    assert result.config == DNSConfig(("10.96.0.10",), (*CLUSTER_SEARCH, "corp.example", "example"), ("ndots:5",))
    assert result.events == ()


def test_cluster_search_list_drops_duplicates_and_needs_a_domain() -> None:
    assert cluster_searches("prod", "cluster.local", ["cluster.local", "x.example"]) == (*CLUSTER_SEARCH, "x.example")
    assert cluster_searches("prod", "", ["x.example"]) == ("x.example",)


def test_cluster_first_on_host_network_is_default_unless_with_host_net() -> None:
    assert pod_dns(pod(hostNetwork=True), CLUSTER, HOST).config == HOST
    with_host_net = pod_dns(pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), CLUSTER, HOST)
    assert with_host_net.config.servers == ("10.96.0.10",)
    assert pod_dns(pod(dnsPolicy="ClusterFirstWithHostNet"), CLUSTER, HOST).config.servers == ("10.96.0.10",)


def test_default_takes_the_host_config_as_is() -> None:
    assert pod_dns(pod(dnsPolicy="Default"), CLUSTER, HOST) == pod_dns(pod(dnsPolicy="Default"), DNSSettings(), HOST)
    assert pod_dns(pod(dnsPolicy="Default"), CLUSTER, HOST).config == HOST


def test_missing_cluster_dns_falls_back_to_default_with_an_event() -> None:
    result = pod_dns(pod(), DNSSettings(cluster_domain="cluster.local"), HOST)
    assert result.config == HOST
    assert result.events == ((
        MISSING_CLUSTER_DNS,
        'pod: "web_prod(u1)". kubelet does not have ClusterDNS IP configured and cannot create Pod using '
        '"ClusterFirst" policy. Falling back to "Default" policy.',
    ),)


def test_without_resolv_conf_default_points_at_the_node_itself() -> None:
    no_conf = DNSSettings(resolv_conf="")
    assert pod_dns(pod(dnsPolicy="Default"), no_conf, DNSConfig()).config == DNSConfig(("127.0.0.1",), (".",), ())
    v6 = DNSSettings(resolv_conf="", node_ips=("fd00::1", "10.0.0.1"))
    assert pod_dns(pod(dnsPolicy="Default"), v6, DNSConfig()).config.servers == ("::1", "127.0.0.1")
    # the missing clusterDNS fallback lands there too; ClusterFirst with a server does not
    assert pod_dns(pod(), no_conf, DNSConfig()).config == DNSConfig(("127.0.0.1",), (".",), ())
    with_server = DNSSettings(("10.96.0.10",), "", "")
    assert pod_dns(pod(), with_server, DNSConfig()).config == DNSConfig(("10.96.0.10",), (), ("ndots:5",))


def test_none_starts_empty_and_takes_dns_config() -> None:
    dns_config = {"nameservers": ["192.0.2.53"], "searches": ["a.example"],
                  "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}
    result = pod_dns(pod(dnsPolicy="None", dnsConfig=dns_config), CLUSTER, HOST)
    assert result.config == DNSConfig(("192.0.2.53",), ("a.example",), ("ndots:2", "edns0"))


def test_dns_config_is_appended_without_duplicates_and_its_options_win() -> None:
    dns_config = {"nameservers": ["10.96.0.10", "192.0.2.53"], "searches": ["svc.cluster.local", "z.example"],
                  "options": [{"name": "ndots", "value": "1"}, {"name": "single-request-reopen"}]}
    result = pod_dns(pod(dnsConfig=dns_config), CLUSTER, HOST)
    assert result.config == DNSConfig(
        ("10.96.0.10", "192.0.2.53"),
        (*CLUSTER_SEARCH, "corp.example", "example", "z.example"),
        ("ndots:1", "single-request-reopen"),
    )
    # an option given without a value replaces a valued one by name
    result = pod_dns(pod(dnsPolicy="Default", dnsConfig={"options": [{"name": "timeout"}]}), CLUSTER, HOST)
    assert result.config.options == ("timeout", "rotate")


def test_more_than_three_nameservers_are_cut_with_an_event() -> None:
    dns_config = {"nameservers": ["192.0.2.3", "192.0.2.4"]}
    result = pod_dns(pod(dnsPolicy="Default", dnsConfig=dns_config), CLUSTER, HOST)
    assert result.config.servers == ("192.0.2.1", "192.0.2.2", "192.0.2.3")
    assert result.events == ((DNS_CONFIG_FORMING, "Nameserver limits were exceeded, some nameservers have been "
                              "omitted, the applied nameserver line is: 192.0.2.1 192.0.2.2 192.0.2.3"),)


def test_search_paths_beyond_32_are_cut() -> None:
    host = DNSConfig(searches=tuple(f"d{i}.example" for i in range(40)))
    result = pod_dns(pod(), CLUSTER, host)
    assert len(result.config.searches) == 32
    assert result.config.searches[:3] == CLUSTER_SEARCH and result.config.searches[-1] == "d28.example"
    assert result.events == ((DNS_CONFIG_FORMING, "Search Line limits were exceeded, some search paths have been "
                              "omitted, the applied search line is: " + " ".join(result.config.searches)),)


def test_search_paths_longer_than_253_are_dropped() -> None:
    long_path = "a" * 254
    result = pod_dns(pod(dnsPolicy="Default"), CLUSTER, DNSConfig(searches=("x.example", long_path, "y.example")))
    assert result.config.searches == ("x.example", "y.example")
    assert [reason for reason, _ in result.events] == [DNS_CONFIG_FORMING]


def test_search_line_over_2048_characters_loses_paths_from_the_end() -> None:
    paths = tuple(f"{i:02d}" + "b" * 198 for i in range(11))  # 11 * 200 + 10 spaces = 2210 characters
    result = pod_dns(pod(dnsPolicy="Default"), CLUSTER, DNSConfig(searches=paths))
    assert result.config.searches == paths[:10]  # 10 * 200 + 9 = 2009
    assert len(result.events) == 1
    exact = (*("c" * 200 for _ in range(10)), "d" * 38)
    assert len(" ".join(exact)) == 2048
    assert pod_dns(pod(dnsPolicy="Default"), CLUSTER, DNSConfig(searches=exact)).events == ()


def test_both_limits_give_two_events_nameservers_first() -> None:
    dns_config = {"nameservers": [f"192.0.2.{i}" for i in range(4)], "searches": [f"s{i}.example" for i in range(33)]}
    result = pod_dns(pod(dnsPolicy="None", dnsConfig=dns_config), CLUSTER, HOST)
    assert [reason for reason, _ in result.events] == [DNS_CONFIG_FORMING, DNS_CONFIG_FORMING]
    assert result.events[0][1].startswith("Nameserver limits") and result.events[1][1].startswith("Search Line")
