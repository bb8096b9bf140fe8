"""The agent's shapes to CRI v1 messages and back (cri.remote.convert)."""

from __future__ import annotations

import json

import pytest

from cri.remote import convert
from cri.remote.runtime import cgroup_driver_from_status, cri_timeout
from cri.remote.v1 import api_pb2 as pb
from cri.types import (
    ContainerConfig,
    ContainerMeta,
    ContainerState,
    DNSConfig,
    LinuxContainerSecurityContext,
    LinuxResources,
    LinuxSandboxSecurityContext,
    Mount,
    PodMeta,
    PodSandboxConfig,
    PortMapping,
    SandboxState,
    SecurityProfile,
)

POD = PodSandboxConfig(
    metadata=PodMeta("web", "default", "uid-1", 2),
    hostname="web",
    log_directory="/var/log/pods/default_web_uid-1",
    dns=DNSConfig(("10.96.0.10",), ("default.svc.cluster.local",), ("ndots:5",)),
    port_mappings=(PortMapping(80, "TCP", 8080, "127.0.0.1"), PortMapping(53, "UDP")),
    labels={"app": "web"},
    annotations={"kubernetes.io/config.source": "file"},
    cgroup_parent="/kubepods/burstable/poduid-1",
    resources=LinuxResources(cpu_shares=512, memory_limit_bytes=1 << 30),
    sysctls={"net.ipv4.ip_unprivileged_port_start": "0"},
    security=LinuxSandboxSecurityContext(run_as_user=1000, supplemental_groups=(5,)),
)


def test_sandbox_config_carries_every_field() -> None:
    out = convert.sandbox_config(POD)
    assert (out.metadata.name, out.metadata.namespace, out.metadata.uid, out.metadata.attempt) == ("web", "default", "uid-1", 2)
    assert (out.hostname, out.log_directory) == ("web", "/var/log/pods/default_web_uid-1")
    assert list(out.dns_config.servers) == ["10.96.0.10"] and list(out.dns_config.options) == ["ndots:5"]
    assert [(p.protocol, p.container_port, p.host_port, p.host_ip) for p in out.port_mappings] == [
        (pb.TCP, 80, 8080, "127.0.0.1"), (pb.UDP, 53, 0, "")]
    # The kubelet's own pod labels are added, as kuberuntime's newPodLabels does.
    assert dict(out.labels) == {"app": "web", "io.kubernetes.pod.name": "web",
                                "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "uid-1"}
    assert dict(out.annotations) == {"kubernetes.io/config.source": "file"}
    linux = out.linux
    assert linux.cgroup_parent == "/kubepods/burstable/poduid-1"
    assert dict(linux.sysctls) == {"net.ipv4.ip_unprivileged_port_start": "0"}
    assert (linux.resources.cpu_shares, linux.resources.memory_limit_in_bytes) == (512, 1 << 30)
    sec = linux.security_context
    assert (sec.run_as_user.value, sec.HasField("run_as_group"), list(sec.supplemental_groups)) == (1000, False, [5])
    ns = sec.namespace_options
    assert (ns.network, ns.pid, ns.ipc) == (pb.POD, pb.POD, pb.POD)


def test_host_namespaces_and_no_dns() -> None:
    from dataclasses import replace

    out = convert.sandbox_config(replace(POD, host_network=True, host_pid=True, host_ipc=True, dns=None))
    ns = out.linux.security_context.namespace_options
    assert (ns.network, ns.pid, ns.ipc) == (pb.NODE, pb.NODE, pb.NODE)
    assert not out.HasField("dns_config")


def test_container_config() -> None:
    config = ContainerConfig(
        metadata=ContainerMeta("app", 3),
        image="busybox:1.36",
        command=("sh", "-c"),
        args=("echo hi",),
        working_dir="/w",
        envs=(("A", "1"), ("B", "ü")),
        mounts=(Mount("/data", "/var/lib/x", readonly=True, propagation="rslave"),),
        labels={"tier": "front"},
        annotations={"io.kubernetes.container.hash": "abc"},
        log_path="app/3.log",
        tty=True,
        resources=LinuxResources(cpu_period=100000, cpu_quota=50000, cpu_shares=512, memory_limit_bytes=64 << 20,
                                 oom_score_adj=999),
        stop_signal="SIGQUIT",
        security=LinuxContainerSecurityContext(
            run_as_user=0, capabilities_add=("NET_ADMIN",), capabilities_drop=("ALL",), readonly_rootfs=True,
            no_new_privs=True, masked_paths=(), readonly_paths=("/proc/sys",),
            seccomp=SecurityProfile("Localhost", "/var/lib/kubelet/seccomp/p.json"),
            apparmor=SecurityProfile("RuntimeDefault")),
    )
    out = convert.container_config(config, POD)
    assert (out.metadata.name, out.metadata.attempt, out.image.image) == ("app", 3, "busybox:1.36")
    assert (list(out.command), list(out.args), out.working_dir) == (["sh", "-c"], ["echo hi"], "/w")
    assert [(e.key, e.value) for e in out.envs] == [("A", b"1"), ("B", "ü".encode())]
    assert [(m.container_path, m.host_path, m.readonly, m.propagation) for m in out.mounts] == [
        ("/data", "/var/lib/x", True, pb.PROPAGATION_HOST_TO_CONTAINER)]
    assert dict(out.labels) == {"tier": "front", "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default",
                                "io.kubernetes.pod.uid": "uid-1", "io.kubernetes.container.name": "app"}
    assert (out.log_path, out.tty, out.stop_signal) == ("app/3.log", True, pb.SIGQUIT)
    res = out.linux.resources
    assert (res.cpu_period, res.cpu_quota, res.cpu_shares, res.memory_limit_in_bytes, res.oom_score_adj) == (
        100000, 50000, 512, 64 << 20, 999)
    sec = out.linux.security_context
    assert (sec.run_as_user.value, sec.HasField("run_as_user"), sec.readonly_rootfs, sec.no_new_privs) == (0, True, True, True)
    assert (list(sec.capabilities.add_capabilities), list(sec.capabilities.drop_capabilities)) == (["NET_ADMIN"], ["ALL"])
    assert (list(sec.masked_paths), list(sec.readonly_paths)) == ([], ["/proc/sys"])
    assert (sec.seccomp.profile_type, sec.seccomp.localhost_ref) == (pb.SecurityProfile.Localhost,
                                                                     "/var/lib/kubelet/seccomp/p.json")
    assert sec.apparmor.profile_type == pb.SecurityProfile.RuntimeDefault
    # Each container has its own PID namespace unless the pod shares one.
    assert sec.namespace_options.pid == pb.CONTAINER


@pytest.mark.parametrize(("sandbox", "pid", "target"), [
    (POD, pb.TARGET, "app-id"),
    (PodSandboxConfig(metadata=POD.metadata, share_process_namespace=True), pb.POD, ""),
    (PodSandboxConfig(metadata=POD.metadata, host_pid=True), pb.NODE, ""),
])
def test_ephemeral_pid_target(sandbox: PodSandboxConfig, pid: int, target: str) -> None:
    """kuberuntime generateLinuxContainerConfig: a target replaces only a container-private PID namespace."""
    config = ContainerConfig(ContainerMeta("dbg"), "busybox", pid_target_id="app-id")
    ns = convert.container_config(config, sandbox).linux.security_context.namespace_options
    assert (ns.pid, ns.target_id) == (pid, target)


def test_bad_values_are_config_errors() -> None:
    config = ContainerConfig(ContainerMeta("app"), "busybox", stop_signal="SIGNOPE")
    with pytest.raises(convert.ConfigError, match="SIGNOPE"):
        convert.container_config(config, POD)
    with pytest.raises(convert.ConfigError, match="propagation"):
        convert.mount(Mount("/a", "/b", propagation="shared"))


def test_statuses_back() -> None:
    status = pb.ContainerStatus(
        id="c1", metadata=pb.ContainerMetadata(name="app", attempt=1), state=pb.CONTAINER_EXITED,
        created_at=1_000_000_000, started_at=2_000_000_000, finished_at=3_500_000_000, exit_code=137,
        image=pb.ImageSpec(image="minikubelet.test/busybox:1.36"), image_ref="sha256:abc", reason="Error",
        labels={"io.kubernetes.container.name": "app"}, annotations={"h": "1"}, log_path="/logs/app/1.log")
    out = convert.container_status(status, "s1")
    assert (out.id, out.sandbox_id, out.metadata, out.state) == ("c1", "s1", ContainerMeta("app", 1), ContainerState.EXITED)
    assert (out.created_at, out.started_at, out.finished_at, out.exit_code, out.reason) == (1.0, 2.0, 3.5, 137, "Error")
    assert (out.image, out.image_ref, out.annotations, out.log_path) == (
        "minikubelet.test/busybox:1.36", "sha256:abc", {"h": "1"}, "/logs/app/1.log")
    assert convert.container_status(pb.ContainerStatus(state=pb.CONTAINER_CREATED), "s").started_at == 0.0

    sandbox = pb.PodSandboxStatus(id="s1", metadata=pb.PodSandboxMetadata(name="web", uid="u", namespace="d"),
                                  state=pb.SANDBOX_READY, created_at=4_000_000_000,
                                  network=pb.PodSandboxNetworkStatus(ip="10.88.0.5"))
    info = {"info": json.dumps({"pid": 42, "runtimeSpec": {"linux": {"namespaces": [
        {"type": "pid"}, {"type": "network", "path": "/run/netns/cni-1"}]}}})}
    got = convert.sandbox_status(sandbox, info)
    assert (got.state, got.ip, got.created_at, got.network_namespace) == (SandboxState.READY, "10.88.0.5", 4.0,
                                                                          "/proc/42/ns/net")
    no_pid = {"info": json.dumps({"runtimeSpec": {"linux": {"namespaces": [{"type": "network", "path": "/x/cni-1"}]}}})}
    assert convert.sandbox_status(sandbox, no_pid).network_namespace == "/x/cni-1"
    host = pb.PodSandboxStatus(state=pb.SANDBOX_READY, network=pb.PodSandboxNetworkStatus(ip="192.0.2.1"))
    host.linux.namespaces.options.network = pb.NODE
    assert convert.sandbox_status(host, {"info": json.dumps({"pid": 7})}).ip == ""  # the kubelet fills node IPs in
    assert convert.sandbox_status(host, {"info": json.dumps({"pid": 7})}).network_namespace == "/proc/7/ns/net"
    stopped = pb.PodSandboxStatus(state=pb.SANDBOX_NOTREADY, network=pb.PodSandboxNetworkStatus(ip="10.88.0.5"))
    assert (convert.sandbox_status(stopped, info).ip, convert.sandbox_status(stopped, info).network_namespace) == ("", "")


def test_summaries_use_the_docker_state_words() -> None:
    assert convert.summary_of_sandbox(pb.PodSandbox(id="s", state=pb.SANDBOX_NOTREADY)).state == "exited"
    words = [convert.summary_of_container(pb.Container(state=s)).state
             for s in (pb.CONTAINER_CREATED, pb.CONTAINER_RUNNING, pb.CONTAINER_EXITED, pb.CONTAINER_UNKNOWN)]
    assert words == ["created", "running", "exited", "unknown"]


def test_image_and_stats() -> None:
    img = pb.Image(id="sha256:1", repo_tags=["a:1"], size=5)
    img.uid.value = 65534
    assert convert.image(img).user == "65534"
    assert convert.image(pb.Image(id="sha256:2", username="nobody")).user == "nobody"
    stats = pb.ContainerStats(attributes=pb.ContainerAttributes(id="c"))
    stats.cpu.timestamp, stats.cpu.usage_core_nano_seconds.value = 2_000_000_000, 123
    stats.memory.timestamp, stats.memory.working_set_bytes.value, stats.memory.usage_bytes.value = 1, 10, 20
    out = convert.container_stats(stats)
    assert (out.container_id, out.timestamp, out.cpu_usage_core_nanoseconds, out.memory_working_set_bytes,
            out.memory_usage_bytes) == ("c", 2.0, 123, 10, 20)


def test_cgroup_driver_from_containerd_16_status() -> None:
    def info(systemd: bool) -> dict[str, str]:
        return {"config": json.dumps({"containerd": {"defaultRuntimeName": "runc", "runtimes": {
            "runc": {"options": {"SystemdCgroup": systemd}}}}})}

    assert cgroup_driver_from_status(info(True)) == "systemd"
    assert cgroup_driver_from_status(info(False)) == "cgroupfs"
    assert cgroup_driver_from_status({"config": json.dumps({"systemdCgroup": True})}) == "systemd"
    assert cgroup_driver_from_status({}) == "cgroupfs"


def test_cri_timeouts_are_whole_seconds_never_zero_by_rounding() -> None:
    assert [cri_timeout(t) for t in (0, 0.2, 1.0, 1.5, 30)] == [0, 1, 1, 2, 30]


def test_container_stats_carry_the_writable_layer() -> None:
    stats = pb.ContainerStats(attributes=pb.ContainerAttributes(id="c1"))
    assert convert.container_stats(stats).writable_layer_used_bytes is None
    stats.writable_layer.fs_id.mountpoint = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
    stats.writable_layer.used_bytes.value = 8 * 2**20
    stats.writable_layer.inodes_used.value = 3
    out = convert.container_stats(stats)
    assert (out.writable_layer_mountpoint, out.writable_layer_used_bytes, out.writable_layer_inodes_used) == (
        "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", 8 * 2**20, 3)
