from __future__ import annotations

from typing import Any

from minikubelet.network.routes import Route, internal_ips, pod_cidrs, wanted_routes


def node(name: str, cidrs: list[str] | None = None, ips: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": name}, "spec": dict(spec),
                           "status": {"addresses": [{"type": "Hostname", "address": name},
                                                    *({"type": "InternalIP", "address": ip} for ip in ips or [])]}}
    if cidrs is not None:
        out["spec"]["podCIDRs"] = cidrs
        out["spec"]["podCIDR"] = cidrs[0] if cidrs else ""
    return out


def test_every_other_node_is_routed_via_its_internal_ip() -> None:
    nodes = [node("a", ["10.244.0.0/24"], ["192.168.1.1"]), node("b", ["10.244.1.0/24"], ["192.168.1.2"]),
             node("c", ["10.244.2.0/24"], ["192.168.1.3"])]
    assert wanted_routes(nodes, "a") == [Route("10.244.1.0/24", "192.168.1.2", "b"),
                                         Route("10.244.2.0/24", "192.168.1.3", "c")]


def test_dual_stack_cidrs_go_via_the_address_of_their_family() -> None:
    nodes = [node("a", ["10.244.0.0/24", "fd00:10:244::/64"], ["192.168.1.1", "fd00::1"]),
             node("b", ["10.244.1.0/24", "fd00:10:244:1::/64"], ["fd00::2", "192.168.1.2"])]
    assert wanted_routes(nodes, "a") == [Route("10.244.1.0/24", "192.168.1.2", "b"),
                                         Route("fd00:10:244:1::/64", "fd00::2", "b")]
    # no IPv6 InternalIP: its IPv6 CIDR is not routable from here, the IPv4 one still is
    nodes[1] = node("b", ["10.244.1.0/24", "fd00:10:244:1::/64"], ["192.168.1.2"])
    assert wanted_routes(nodes, "a") == [Route("10.244.1.0/24", "192.168.1.2", "b")]


def test_broken_nodes_give_no_route_and_stop_no_other() -> None:
    nodes = [node("a", ["10.244.0.0/24"], ["192.168.1.1"]),
             node("no-cidr", None, ["192.168.1.5"]),
             node("no-ip", ["10.244.3.0/24"], []),
             node("junk", ["not-a-cidr", "10.244.4.0/24"], ["bogus", "192.168.1.4"]),
             node("overlap", ["10.244.0.0/16"], ["192.168.1.6"]),  # would swallow our own pods
             {"metadata": "x"}, {"spec": []},
             node("b", ["10.244.1.0/24"], ["192.168.1.2"])]
    assert wanted_routes(nodes, "a") == [Route("10.244.1.0/24", "192.168.1.2", "b"),
                                         Route("10.244.4.0/24", "192.168.1.4", "junk")]


def test_single_pod_cidr_field_and_normalisation() -> None:
    assert pod_cidrs({"spec": {"podCIDR": "10.244.7.0/24"}}) == ("10.244.7.0/24",)
    assert pod_cidrs({"spec": {"podCIDRs": ["fd00:0:0:0::/64"]}}) == ("fd00::/64",)
    assert pod_cidrs({"spec": {"podCIDRs": ["10.244.7.1/24"]}}) == ()  # host bits set: not a network
    assert internal_ips({"status": {"addresses": "x"}}) == ()
