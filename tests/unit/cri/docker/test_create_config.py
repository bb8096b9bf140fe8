"""CRI configs -> Docker create bodies (cri-dockerd's mapping)."""

from __future__ import annotations

import pytest

from cri.docker.create_config import (
    ConfigError,
    container_create_body,
    mount_binds,
    port_bindings,
    sandbox_create_body,
)
from cri.types import (
    ContainerConfig,
    ContainerMeta,
    DNSConfig,
    LinuxResources,
    Mount,
    PodMeta,
    PodSandboxConfig,
    PortMapping,
)

POD = PodMeta("web", "prod", "uid-1", 0)


def test_sandbox_body_owns_network_ipc_uts_and_dns() -> None:
    config = PodSandboxConfig(
        metadata=POD,
        hostname="web",
        dns=DNSConfig(("10.96.0.10",), ("prod.svc.cluster.local",), ("ndots:5",)),
        port_mappings=(PortMapping(80, "TCP", 8080, "127.0.0.1"), PortMapping(53, "UDP", 0)),
        cgroup_parent="/kubepods/besteffort/poduid-1",
        annotations={"a": "b"},
    )
    body = sandbox_create_body(config, "registry.k8s.io/pause:3.10")
    host = body["HostConfig"]
    assert (body["Image"], body["Hostname"]) == ("registry.k8s.io/pause:3.10", "web")
    assert (host["NetworkMode"], host["IpcMode"], host["RestartPolicy"]) == ("default", "shareable", {"Name": "no"})
    assert (host["Dns"], host["DnsSearch"], host["DnsOptions"]) == (
        ["10.96.0.10"],
        ["prod.svc.cluster.local"],
        ["ndots:5"],
    )
    assert body["ExposedPorts"] == {"80/tcp": {}}
    assert host["PortBindings"] == {"80/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8080"}]}
    assert host["CgroupParent"] == "/kubepods/besteffort/poduid-1"
    assert host["LogConfig"]["Type"] == "json-file"
    assert body["Labels"]["annotation.a"] == "b"
    assert "PidMode" not in host


def test_host_namespaces_sandbox_has_no_hostname() -> None:
    config = PodSandboxConfig(metadata=POD, hostname="node1", host_network=True, host_ipc=True, host_pid=True)
    body = sandbox_create_body(config, "pause")
    assert "Hostname" not in body
    assert (body["HostConfig"]["NetworkMode"], body["HostConfig"]["IpcMode"], body["HostConfig"]["PidMode"]) == (
        "host",
        "host",
        "host",
    )


def test_port_bindings_group_host_ports_per_container_port() -> None:
    exposed, bindings = port_bindings(
        (PortMapping(80, "TCP", 8080), PortMapping(80, "TCP", 8081), PortMapping(9, "SCTP", 9))
    )
    assert exposed == {"80/tcp": {}, "9/sctp": {}}
    assert [b["HostPort"] for b in bindings["80/tcp"]] == ["8080", "8081"]


def test_mount_binds() -> None:
    mounts = (
        Mount("/data", "/srv/data"),
        Mount("/etc/cfg", "/srv/cfg", readonly=True),
        Mount("/shared", "/srv/shared", propagation="rshared"),
        Mount("/in", "/srv/in", readonly=True, propagation="rslave"),
    )
    assert mount_binds(mounts) == [
        "/srv/data:/data",
        "/srv/cfg:/etc/cfg:ro",
        "/srv/shared:/shared:rshared",
        "/srv/in:/in:ro,rslave",
    ]


def test_container_body_joins_sandbox_and_maps_everything() -> None:
    sandbox = PodSandboxConfig(
        metadata=POD, log_directory="/var/log/pods/prod_web_uid-1", cgroup_parent="/kubepods/poduid-1"
    )
    config = ContainerConfig(
        metadata=ContainerMeta("app", 2),
        image="busybox:1.36",
        command=("sh", "-c"),
        args=("echo hi",),
        working_dir="/w",
        envs=(("A", "1"), ("B", "x=y")),
        log_path="app/2.log",
        resources=LinuxResources(
            cpu_period=100_000,
            cpu_quota=50_000,
            cpu_shares=512,
            memory_limit_bytes=64 << 20,
            oom_score_adj=900,
            pids_limit=100,
        ),
        stop_signal="SIGQUIT",
        privileged=True,
        run_as_user=1000,
        run_as_group=3000,
        readonly_rootfs=True,
    )
    body = container_create_body("sb1", config, sandbox)
    host = body["HostConfig"]
    assert (body["Entrypoint"], body["Cmd"]) == (["sh", "-c"], ["echo hi"])
    assert body["Env"] == ["A=1", "B=x=y"]
    assert (body["User"], body["StopSignal"], body["WorkingDir"]) == ("1000:3000", "SIGQUIT", "/w")
    assert (host["NetworkMode"], host["IpcMode"]) == ("container:sb1", "container:sb1")
    assert "PidMode" not in host and "UTSMode" not in host
    assert (host["Privileged"], host["ReadonlyRootfs"], host["CgroupParent"]) == (True, True, "/kubepods/poduid-1")
    assert {
        k: host[k] for k in ("CpuShares", "CpuQuota", "CpuPeriod", "Memory", "MemorySwap", "OomScoreAdj", "PidsLimit")
    } == {
        "CpuShares": 512,
        "CpuQuota": 50_000,
        "CpuPeriod": 100_000,
        "Memory": 64 << 20,
        "MemorySwap": 64 << 20,
        "OomScoreAdj": 900,
        "PidsLimit": 100,
    }
    assert body["Labels"]["io.kubernetes.container.logpath"] == "/var/log/pods/prod_web_uid-1/app/2.log"
    assert body["Labels"]["io.kubernetes.sandbox.id"] == "sb1"


def test_container_defaults_leave_image_entrypoint_and_cmd_alone() -> None:
    body = container_create_body("sb1", ContainerConfig(ContainerMeta("app"), "img"), PodSandboxConfig(metadata=POD))
    assert body["Entrypoint"] is None and body["Cmd"] is None
    assert body["User"] == "" and "StopSignal" not in body
    assert not {"Memory", "CpuShares", "OomScoreAdj", "CgroupParent"} & body["HostConfig"].keys()
    # Only a command: Cmd stays null, so Docker does not append the image's CMD.
    only_command = container_create_body(
        "sb1", ContainerConfig(ContainerMeta("app"), "img", command=("run",)), PodSandboxConfig(metadata=POD)
    )
    assert (only_command["Entrypoint"], only_command["Cmd"]) == (["run"], None)


def test_host_network_and_pid_pods() -> None:
    sandbox = PodSandboxConfig(metadata=POD, host_network=True, host_pid=True)
    host = container_create_body("sb1", ContainerConfig(ContainerMeta("app"), "img"), sandbox)["HostConfig"]
    assert (host["UTSMode"], host["PidMode"], host["NetworkMode"]) == ("host", "host", "container:sb1")


def test_group_without_user_is_rejected() -> None:
    with pytest.raises(ConfigError):
        container_create_body(
            "sb1", ContainerConfig(ContainerMeta("app"), "img", run_as_group=5), PodSandboxConfig(metadata=POD)
        )
