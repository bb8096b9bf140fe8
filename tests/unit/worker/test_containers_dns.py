"""The worker applies DNS, hostname and /etc/hosts: to the sandbox config, the events and each container's mounts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from cri.types import ContainerConfig, DNSConfig, Mount, PodSandboxConfig
from minikubelet.worker.dns import DNSSettings
from tests.unit.fake_node import FakeNode, make_pod


@pytest.fixture
def resolv_conf(tmp_path: Path) -> Path:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 192.0.2.1\nsearch lab.example\noptions timeout:2\n")
    return path


@asynccontextmanager
async def run(tmp_path: Path, settings: DNSSettings, **spec: Any) -> AsyncIterator[FakeNode]:
    node = FakeNode(tmp_path / "root", dns=settings)
    try:
        node.config.set_source_pods("file", [make_pod(**spec)])
        await node.settle()
        yield node
    finally:
        await node.close()


def sandbox_configs(node: FakeNode) -> list[PodSandboxConfig]:
    return [call.args[0] for call in node.runtime.calls if call.op == "run_pod_sandbox"]


def container_configs(node: FakeNode) -> list[ContainerConfig]:
    return [call.args[1] for call in node.runtime.calls if call.op == "create_container"]


async def test_cluster_first_pod_gets_cluster_dns_hostname_and_hosts_file(tmp_path: Path, resolv_conf: Path) -> None:
    settings = DNSSettings(("10.96.0.10",), "cluster.local", str(resolv_conf))
    async with run(tmp_path, settings, hostname="db-0", subdomain="db", setHostnameAsFQDN=True) as node:
        assert node.phase() == "Running"
        (sandbox,) = sandbox_configs(node)
        assert sandbox.dns == DNSConfig(
            ("10.96.0.10",),
            ("default.svc.cluster.local", "svc.cluster.local", "cluster.local", "lab.example"),
            ("ndots:5",),
        )
        assert sandbox.hostname == "db-0.db.default.svc.cluster.local"
        (app,) = container_configs(node)
        hosts = tmp_path / "root" / "pods" / "uid-1" / "etc-hosts"
        assert Mount(container_path="/etc/hosts", host_path=str(hosts)) in app.mounts
        pod_ip = (node.statuses.get_pod_status("uid-1") or {})["podIP"]
        assert hosts.read_text().endswith(f"{pod_ip}\tdb-0.db.default.svc.cluster.local\tdb-0\n")
        assert [reason for reason, _ in node.events()] == ["Pulled", "Created", "Started"]


async def test_missing_cluster_dns_is_an_event_and_the_host_config(tmp_path: Path, resolv_conf: Path) -> None:
    async with run(tmp_path, DNSSettings((), "cluster.local", str(resolv_conf))) as node:
        (sandbox,) = sandbox_configs(node)
        assert sandbox.dns == DNSConfig(("192.0.2.1",), ("lab.example",), ("timeout:2",))
        assert node.events()[0] == ("MissingClusterDNS", 'pod: "p_default(uid-1)". kubelet does not have ClusterDNS '
                                    'IP configured and cannot create Pod using "ClusterFirst" policy. Falling back '
                                    'to "Default" policy.')
        assert node.phase() == "Running"


async def test_too_long_fqdn_fails_the_sandbox(tmp_path: Path, resolv_conf: Path) -> None:
    settings = DNSSettings(("10.96.0.10",), "cluster.local", str(resolv_conf))
    async with run(tmp_path, settings, hostname="h" * 40, subdomain="s", setHostnameAsFQDN=True) as node:
        assert sandbox_configs(node) == []
        assert node.events() == [("FailedCreatePodSandBox", (
            "Failed to create pod sandbox: failed to construct FQDN from pod hostname and cluster domain, FQDN "
            f"{'h' * 40}.s.default.svc.cluster.local is too long (64 characters is the max, 68 characters requested)"))]
        assert node.phase() == "Pending"


async def test_unreadable_resolv_conf_fails_the_sandbox(tmp_path: Path) -> None:
    async with run(tmp_path, DNSSettings(("10.96.0.10",), "", str(tmp_path / "missing"))) as node:
        assert sandbox_configs(node) == []
        assert node.events() == [("FailedCreatePodSandBox",
                                  f"Failed to create pod sandbox: open {tmp_path}/missing: no such file or directory")]


async def test_a_container_that_mounts_etc_hosts_keeps_its_own(tmp_path: Path, resolv_conf: Path) -> None:
    containers = [{"name": "app", "image": "busybox:1.36",
                   "volumeMounts": [{"name": "h", "mountPath": "/etc/hosts", "subPath": "hosts"}]}]
    settings = DNSSettings(("10.96.0.10",), "cluster.local", str(resolv_conf))
    async with run(tmp_path, settings, containers=containers, volumes=[{"name": "h", "emptyDir": {}}]) as node:
        (app,) = container_configs(node)
        assert [m.host_path for m in app.mounts if m.container_path == "/etc/hosts"] != []
        assert not (tmp_path / "root" / "pods" / "uid-1" / "etc-hosts").exists()
