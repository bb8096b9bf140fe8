"""Service environment variables (upstream getServiceEnvVarMap / envvars.FromServices)."""

from __future__ import annotations

from typing import Any

from minikubelet.api.service_env import from_service, service_env_map


def svc(name: str, ns: str, ip: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"clusterIP": ip, "ports": list(ports)}}


KUBERNETES = svc("kubernetes", "default", "10.96.0.1", {"name": "https", "port": 443, "protocol": "TCP"})


def test_one_service_gives_host_port_named_ports_and_docker_link_variables() -> None:
    s = svc("my-db", "app", "10.96.0.20", {"port": 5432}, {"name": "metrics", "port": 9187, "protocol": "UDP"})
    assert from_service(s) == [
        ("MY_DB_SERVICE_HOST", "10.96.0.20"),
        ("MY_DB_SERVICE_PORT", "5432"),
        ("MY_DB_SERVICE_PORT_METRICS", "9187"),
        ("MY_DB_PORT", "tcp://10.96.0.20:5432"),
        ("MY_DB_PORT_5432_TCP", "tcp://10.96.0.20:5432"),
        ("MY_DB_PORT_5432_TCP_PROTO", "tcp"),
        ("MY_DB_PORT_5432_TCP_PORT", "5432"),
        ("MY_DB_PORT_5432_TCP_ADDR", "10.96.0.20"),
        ("MY_DB_PORT_9187_UDP", "udp://10.96.0.20:9187"),
        ("MY_DB_PORT_9187_UDP_PROTO", "udp"),
        ("MY_DB_PORT_9187_UDP_PORT", "9187"),
        ("MY_DB_PORT_9187_UDP_ADDR", "10.96.0.20"),
    ]


def test_ipv6_cluster_ips_are_bracketed_as_go_join_host_port() -> None:
    assert ("V6_PORT", "tcp://[fd00::a]:80") in from_service(svc("v6", "x", "fd00::a", {"port": 80}))


def test_the_kubernetes_service_always_and_the_namespace_services_only_with_service_links() -> None:
    services = [KUBERNETES, svc("web", "app", "10.96.0.30", {"port": 80}), svc("other", "elsewhere", "10.96.0.31",
                                                                              {"port": 81})]
    with_links = service_env_map(services, "app", True)
    assert with_links["KUBERNETES_SERVICE_HOST"] == "10.96.0.1" and with_links["KUBERNETES_SERVICE_PORT"] == "443"
    assert with_links["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert with_links["WEB_SERVICE_HOST"] == "10.96.0.30"
    assert not any(k.startswith("OTHER_") for k in with_links)
    without = service_env_map(services, "app", False)
    assert without == dict(from_service(KUBERNETES))


def test_headless_services_and_services_without_ports_or_ip_are_skipped() -> None:
    services = [KUBERNETES, svc("headless", "app", "None", {"port": 80}), svc("noip", "app", "", {"port": 80}),
                svc("noports", "app", "10.96.0.40"), {"metadata": "junk"}, {"spec": {"clusterIP": "1.2.3.4"}}]
    env = service_env_map(services, "app", True)
    assert set(env) == {k for k, _ in from_service(KUBERNETES)}


def test_a_namespace_service_named_kubernetes_replaces_the_master_one_in_its_namespace() -> None:
    mine = svc("kubernetes", "app", "10.96.0.50", {"port": 8443})
    for order in ([KUBERNETES, mine], [mine, KUBERNETES]):
        assert service_env_map(order, "app", True)["KUBERNETES_SERVICE_HOST"] == "10.96.0.50"
    assert service_env_map([mine, KUBERNETES], "app", False)["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
