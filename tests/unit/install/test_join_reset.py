"""`join` and `reset` into a directory (`--root`), with systemctl recorded: the files the agent then reads are
loaded with the agent's own loaders, and a second run changes nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography import x509

from minikubelet.base.clock import RealClock
from minikubelet.config.kubelet_config import load_config
from minikubelet.install import layout as paths
from minikubelet.install.ca_pin import spki_hash
from minikubelet.install.join import JoinError, JoinOptions, join, read_config_patch, unit_text
from minikubelet.install.layout import Layout
from minikubelet.install.reset import reset
from minikubelet.install.systemctl import RecordingSystemctl
from minikubelet.kubeapi.kubeconfig import load_kubeconfig
from tests.apiserver import ApiServer

TOKEN = "abcdef.0123456789abcdef"


def options(api: ApiServer, **kw: object) -> JoinOptions:
    pin = spki_hash(x509.load_pem_x509_certificate(api.ca.cert_pem))
    base: dict[str, object] = {"endpoint": api.url, "token": TOKEN, "ca_cert_hashes": [pin], "discovery_timeout": 0}
    base.update(kw)
    return JoinOptions(**base)  # type: ignore[arg-type]


async def test_join_writes_what_the_agent_loads_and_is_idempotent(api: ApiServer, tmp_path: Path) -> None:
    api.add_bootstrap_token("abcdef", "0123456789abcdef")
    layout, systemctl, lines = Layout(str(tmp_path)), RecordingSystemctl(), list[str]()
    opts = options(api, node_name="worker-1", node_ip="192.0.2.10", cluster_dns=["10.96.0.10"])
    assert await join(opts, layout, systemctl, RealClock(), lines.append)
    assert systemctl.calls == ["daemon-reload", "enable minikubelet.service", "start minikubelet.service"]

    boot = load_kubeconfig(layout.path(paths.BOOTSTRAP_KUBECONFIG))
    assert (boot.server, boot.ca_pem, boot.token) == (api.url, api.ca.cert_pem, TOKEN)
    assert stat.S_IMODE(os.stat(layout.path(paths.BOOTSTRAP_KUBECONFIG)).st_mode) == 0o600
    assert Path(layout.path(paths.CA_FILE)).read_bytes() == api.ca.cert_pem
    config, _ = load_config(layout.path(paths.CONFIG), {})
    assert (config.hostname_override, config.root_dir, config.static_pod_path) == \
        ("worker-1", paths.ROOT_DIR, paths.MANIFESTS)
    assert (config.cluster_dns, config.cgroup_driver, config.rotate_certificates) == (("10.96.0.10",), "cgroupfs", True)
    assert config.authentication.client_ca_file == paths.CA_FILE and config.authorization_mode == "Webhook"
    assert (config.address, config.read_only_port) == ("0.0.0.0", 0)  # :10250 reachable by the API server
    assert Path(layout.path(paths.FLAGS_ENV)).read_text() == 'MINIKUBELET_ARGS="--node-ip=192.0.2.10"\n'
    assert Path(layout.path(paths.UNIT)).read_bytes() == unit_text()
    assert os.path.isdir(layout.path(paths.MANIFESTS))

    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()}
    systemctl.calls.clear()
    lines.clear()
    assert not await join(opts, layout, systemctl, RealClock(), lines.append)
    assert systemctl.calls == ["enable minikubelet.service"]
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()} == before
    assert "[systemd] minikubelet.service already running" in lines


    # another node IP: the flags change, the running unit is restarted
    systemctl.calls.clear()
    assert await join(options(api, node_name="worker-1", node_ip="192.0.2.11", cluster_dns=["10.96.0.10"]),
                      layout, systemctl, RealClock(), lines.append)
    assert systemctl.calls == ["daemon-reload", "enable minikubelet.service", "restart minikubelet.service"]


async def test_join_refuses_without_a_pin_and_to_a_second_cluster(api: ApiServer, tmp_path: Path) -> None:
    api.add_bootstrap_token("abcdef", "0123456789abcdef")
    layout, systemctl = Layout(str(tmp_path)), RecordingSystemctl()
    with pytest.raises(JoinError, match="without --discovery-token-ca-cert-hash can be unsafe"):
        await join(options(api, ca_cert_hashes=[]), layout, systemctl, RealClock(), print)
    kubeconfig = Path(layout.path(paths.KUBECONFIG))
    kubeconfig.parent.mkdir(parents=True)
    kubeconfig.write_text("clusters:\n- cluster:\n    server: https://198.51.100.1:6443\n  name: x\n")
    with pytest.raises(JoinError, match=r"already joins this node to https://198.51.100.1:6443.*minikubelet reset"):
        await join(options(api), layout, systemctl, RealClock(), print)
    assert systemctl.calls == [] and not os.path.exists(layout.path(paths.BOOTSTRAP_KUBECONFIG))


async def test_join_on_the_machine_needs_an_installed_agent_or_a_wheelhouse(api: ApiServer, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    api.add_bootstrap_token("abcdef", "0123456789abcdef")
    monkeypatch.setattr(Layout, "on_machine", property(lambda self: True))
    with pytest.raises(JoinError, match="the agent is not installed in /opt/minikubelet/venv: pass --wheelhouse"):
        await join(options(api), Layout(str(tmp_path)), RecordingSystemctl(), RealClock(), print)
    with pytest.raises(JoinError, match="--wheelhouse /nonexistent: not a directory"):
        await join(options(api, wheelhouse="/nonexistent"), Layout(str(tmp_path)), RecordingSystemctl(),
                   RealClock(), print)


async def test_reset_undoes_join_and_then_finds_nothing(api: ApiServer, tmp_path: Path) -> None:
    api.add_bootstrap_token("abcdef", "0123456789abcdef")
    root = tmp_path / "root"
    layout, systemctl = Layout(str(root)), RecordingSystemctl()
    await join(options(api), layout, systemctl, RealClock(), print)
    state = Path(layout.path(paths.ROOT_DIR))
    (state / "pods" / "uid-1" / "volumes").mkdir(parents=True)
    Path(layout.path(paths.KUBECONFIG)).write_text("written by the TLS bootstrap\n")
    # a cgroup v1 layout: a pod cgroup tree under two controllers, and a sibling that is not ours
    cgroups = tmp_path / "cgroup"
    for controller in ("cpu,cpuacct", "memory"):
        (cgroups / controller / "kubepods" / "burstable" / "pod-uid-1").mkdir(parents=True)
        (cgroups / controller / "system.slice").mkdir(parents=True)
    systemctl.calls.clear()
    lines: list[str] = []
    assert await reset(layout, systemctl, lines.append, cgroup_mount=cgroups, remove_containers=False)
    assert systemctl.calls == ["stop minikubelet.service", "disable minikubelet.service", "daemon-reload"]
    assert "[reset] cgroups: 6 removed" in lines
    for node_path in (paths.ROOT_DIR, paths.KUBECONFIG, paths.BOOTSTRAP_KUBECONFIG, paths.CA_FILE, paths.UNIT):
        assert not os.path.exists(layout.path(node_path)), node_path
    assert sorted(p.name for p in (cgroups / "memory").iterdir()) == ["system.slice"]
    assert os.path.isdir(layout.path(paths.MANIFESTS))  # the user's static pods stay, as with kubeadm reset

    systemctl.calls.clear()
    assert not await reset(layout, systemctl, lines.append, cgroup_mount=cgroups, remove_containers=False)
    assert systemctl.calls == []


async def test_kubelet_config_patch_lands_in_the_configuration(api: ApiServer, tmp_path: Path) -> None:
    api.add_bootstrap_token("abcdef", "0123456789abcdef")
    patch = tmp_path / "patch.yaml"
    patch.write_text("podPidsLimit: 512\nnodeStatusUpdateFrequency: 5s\ncgroupDriver: cgroupfs\n")
    layout = Layout(str(tmp_path / "root"))
    await join(options(api, config_patch=read_config_patch(str(patch))), layout, RecordingSystemctl(),
               RealClock(), print)
    config, _ = load_config(layout.path(paths.CONFIG), {})
    assert (config.pod_pids_limit, config.node_status_update_frequency) == (512, 5.0)
    patch.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    with pytest.raises(JoinError, match="must be a mapping of KubeletConfiguration fields"):
        read_config_patch(str(patch))
    with pytest.raises(JoinError, match="--kubelet-config-patch /nonexistent"):
        read_config_patch("/nonexistent")


async def test_join_passes_the_pod_network_flags_to_the_agent(api: ApiServer, tmp_path: Path) -> None:
    api.add_bootstrap_token("abcdef", "0123456789abcdef")
    layout = Layout(str(tmp_path))
    opts = options(api, node_ip="192.0.2.10", pod_network="host-gw", non_masquerade_cidr="10.244.0.0/16")
    assert await join(opts, layout, RecordingSystemctl(), RealClock(), list[str]().append)
    assert Path(layout.path(paths.FLAGS_ENV)).read_text() == (
        'MINIKUBELET_ARGS="--node-ip=192.0.2.10 --pod-network=host-gw --non-masquerade-cidr=10.244.0.0/16"\n')
