"""The pod network as a Docker bridge network: its create body, and sandboxes placed on it."""

from __future__ import annotations

from cri.docker.convert import sandbox_status
from cri.docker.create_config import sandbox_create_body
from cri.docker.pod_network import POD_NETWORK, gateway, network_cidrs, network_create_body
from cri.types import PodMeta, PodSandboxConfig
from tests.unit.cri.docker.test_convert import sandbox_inspect

POD = PodMeta("web", "prod", "uid-1", 0)


def test_network_on_the_pod_cidr_without_docker_masquerade() -> None:
    body = network_create_body(("10.244.1.0/24",))
    assert body["Name"] == POD_NETWORK and body["Driver"] == "bridge" and body["EnableIPv6"] is False
    assert body["IPAM"]["Config"] == [{"Subnet": "10.244.1.0/24", "Gateway": "10.244.1.1"}]
    assert body["Options"] == {"com.docker.network.bridge.name": "cbr0",
                               "com.docker.network.bridge.enable_ip_masquerade": "false"}
    assert network_cidrs(body) == ("10.244.1.0/24",)


def test_dual_stack_network_has_a_subnet_per_family() -> None:
    body = network_create_body(("10.244.1.0/24", "fd00:10:244:1::/64"))
    assert body["EnableIPv6"] is True
    assert [c["Gateway"] for c in body["IPAM"]["Config"]] == ["10.244.1.1", "fd00:10:244:1::1"]
    assert gateway("fd00:10:244:1::/64") == "fd00:10:244:1::1"


def test_sandboxes_join_the_pod_network_unless_they_use_the_hosts() -> None:
    assert sandbox_create_body(PodSandboxConfig(metadata=POD), "pause", POD_NETWORK)["HostConfig"][
        "NetworkMode"] == POD_NETWORK
    assert sandbox_create_body(PodSandboxConfig(metadata=POD, host_network=True), "pause", POD_NETWORK)[
        "HostConfig"]["NetworkMode"] == "host"


def test_a_dual_stack_sandbox_reports_its_other_family_as_an_additional_ip() -> None:
    raw = sandbox_inspect(True, POD_NETWORK)
    raw["NetworkSettings"] = {"IPAddress": "", "GlobalIPv6Address": "", "Networks": {POD_NETWORK: {
        "IPAddress": "10.244.1.2", "GlobalIPv6Address": "fd00:10:244:1::2"}}}
    status = sandbox_status(raw)
    assert (status.ip, status.additional_ips) == ("10.244.1.2", ("fd00:10:244:1::2",))
    assert sandbox_status(sandbox_inspect(True)).additional_ips == ()
    assert sandbox_status(sandbox_inspect(False)).additional_ips == ()
