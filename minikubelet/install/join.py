"""`minikubelet join`: discovery, the node's files, the agent's venv, the systemd unit; running it again
with the same arguments changes nothing (every step compares before it writes)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import yaml

from minikubelet.base.clock import Clock
from minikubelet.install import layout as paths
from minikubelet.install.bootstrap_token import BootstrapToken, parse_token
from minikubelet.install.ca_pin import parse_pins
from minikubelet.install.discovery import DEFAULT_TIMEOUT, ClusterInfo, discover
from minikubelet.install.files import install_file
from minikubelet.install.layout import Layout
from minikubelet.install.systemctl import ServiceManager

Report = Callable[[str], None]
TOKEN_USER = "tls-bootstrap-token-user"  # kubeadm's name for the bootstrap kubeconfig's user
CLUSTER_NAME = "kubernetes"


class JoinError(Exception):
    pass


@dataclass(frozen=True)
class JoinOptions:
    endpoint: str
    token: str
    ca_cert_hashes: list[str] = field(default_factory=list)
    unsafe_skip_ca_verification: bool = False
    node_name: str = ""
    node_ip: str = ""
    cluster_dns: list[str] = field(default_factory=list)
    cluster_domain: str = "cluster.local"
    cgroup_driver: str = "cgroupfs"
    container_runtime_endpoint: str = ""
    config_patch: dict[str, object] = field(default_factory=dict)  # KubeletConfiguration keys set on top
    wheelhouse: str = ""
    discovery_timeout: float = DEFAULT_TIMEOUT
    pod_network: str = ""  # the agent's --pod-network (host-gw)
    non_masquerade_cidr: str = ""  # the agent's --non-masquerade-cidr (the cluster CIDR)


def unit_text() -> bytes:
    return resources.files("minikubelet.install").joinpath("minikubelet.service").read_bytes()


def bootstrap_kubeconfig(info: ClusterInfo, token: BootstrapToken) -> bytes:
    context = f"{TOKEN_USER}@{CLUSTER_NAME}"
    doc = {
        "apiVersion": "v1",
        "clusters": [{"cluster": {"certificate-authority-data": base64.b64encode(info.ca_pem).decode(),
                                  "server": info.server}, "name": CLUSTER_NAME}],
        "contexts": [{"context": {"cluster": CLUSTER_NAME, "user": TOKEN_USER}, "name": context}],
        "current-context": context,
        "kind": "Config",
        "preferences": {},
        "users": [{"name": TOKEN_USER, "user": {"token": str(token)}}],
    }
    return yaml.safe_dump(doc, sort_keys=False).encode()


def kubelet_configuration(opts: JoinOptions) -> bytes:
    doc: dict[str, object] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "rootDir": paths.ROOT_DIR,
        "staticPodPath": paths.MANIFESTS,
        "cgroupDriver": opts.cgroup_driver,
        "rotateCertificates": True,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": paths.CA_FILE}},
        "authorization": {"mode": "Webhook"},
        "clusterDomain": opts.cluster_domain,
        # upstream's defaults, not the standalone agent's loopback ones: the API server reaches the kubelet API
        # (:10250) at the node's address for logs, exec and metrics; the unauthenticated read-only port stays off
        "address": "0.0.0.0",
        "readOnlyPort": 0,
    }
    if opts.cluster_dns:
        doc["clusterDNS"] = list(opts.cluster_dns)
    if opts.node_name:
        doc["hostnameOverride"] = opts.node_name
    if opts.container_runtime_endpoint:
        doc["containerRuntimeEndpoint"] = opts.container_runtime_endpoint
    doc.update(opts.config_patch)
    return yaml.safe_dump(doc, sort_keys=False).encode()


def read_config_patch(path: str) -> dict[str, object]:
    """`--kubelet-config-patch FILE`: a YAML mapping of KubeletConfiguration keys (checked when the agent loads it)."""
    try:
        with open(path, "rb") as f:
            doc = yaml.safe_load(f.read(1 << 20))
    except (OSError, yaml.YAMLError) as e:
        raise JoinError(f"--kubelet-config-patch {path}: {e}") from None
    if not isinstance(doc, dict) or any(k in doc for k in ("apiVersion", "kind")):
        raise JoinError(f"--kubelet-config-patch {path}: must be a mapping of KubeletConfiguration fields "
                        "(without apiVersion/kind)")
    return {str(k): v for k, v in doc.items()}


def flags_env(opts: JoinOptions) -> bytes:
    args = [f"--node-ip={opts.node_ip}"] if opts.node_ip else []
    # flags with no KubeletConfiguration field travel in the unit's environment file, as --node-ip
    if opts.pod_network:
        args.append(f"--pod-network={opts.pod_network}")
    if opts.non_masquerade_cidr:
        args.append(f"--non-masquerade-cidr={opts.non_masquerade_cidr}")
    return f'MINIKUBELET_ARGS="{" ".join(args)}"\n'.encode()


def _check_not_joined_elsewhere(layout: Layout, info: ClusterInfo) -> None:
    try:
        with open(layout.path(paths.KUBECONFIG), "rb") as f:
            doc = yaml.safe_load(f.read(1 << 20))
        server = str(doc["clusters"][0]["cluster"]["server"]).rstrip("/")
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError):
        return
    if server != info.server:
        raise JoinError(f"{paths.KUBECONFIG} already joins this node to {server}, not {info.server}: "
                        f"run `minikubelet reset` first")


def install_agent(layout: Layout, wheelhouse: str, report: Report) -> bool:
    """The venv under /opt/minikubelet from a wheelhouse (offline: --no-index); True when pip installed anything."""
    venv = layout.path(paths.VENV)
    if not wheelhouse:
        if os.path.exists(os.path.join(venv, "bin", "minikubelet")) or not layout.on_machine:
            return False
        raise JoinError(f"the agent is not installed in {paths.VENV}: pass --wheelhouse DIR (scripts/build-wheelhouse)")
    if not os.path.isdir(wheelhouse):
        raise JoinError(f"--wheelhouse {wheelhouse}: not a directory")
    changed = False
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        run([sys.executable, "-m", "venv", venv])
        changed = True
    out = run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-index", "--find-links",
               wheelhouse, "--upgrade", "--disable-pip-version-check", "minikubelet"])
    if "Successfully installed" in out:
        changed = True
    report(f"[install] agent in {paths.VENV}: {'installed' if changed else 'unchanged'}")
    return changed


def run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JoinError(f"{' '.join(argv)}: {e}") from None
    if done.returncode != 0:
        raise JoinError(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


def write_node_files(layout: Layout, opts: JoinOptions, info: ClusterInfo, token: BootstrapToken,
                     report: Report) -> bool:
    files = [
        (paths.CA_FILE, info.ca_pem, 0o644),
        (paths.BOOTSTRAP_KUBECONFIG, bootstrap_kubeconfig(info, token), 0o600),
        (paths.CONFIG, kubelet_configuration(opts), 0o644),
        (paths.FLAGS_ENV, flags_env(opts), 0o644),
        (paths.UNIT, unit_text(), 0o644),
    ]
    changed = False
    for node_path, data, mode in files:
        did = install_file(layout.path(node_path), data, mode)
        report(f"[files] {node_path}: {'written' if did else 'unchanged'}")
        changed |= did
    os.makedirs(layout.path(paths.MANIFESTS), exist_ok=True)
    return changed


def start_unit(systemctl: ServiceManager, changed: bool, report: Report) -> None:
    unit = paths.UNIT_NAME
    if changed:
        systemctl.daemon_reload()
    systemctl.enable(unit)
    if not systemctl.is_active(unit):
        systemctl.start(unit)
        report(f"[systemd] {unit} enabled and started")
    elif changed:
        systemctl.restart(unit)
        report(f"[systemd] {unit} restarted (its files changed)")
    else:
        report(f"[systemd] {unit} already running")


async def join(opts: JoinOptions, layout: Layout, systemctl: ServiceManager, clock: Clock, report: Report) -> bool:
    """True when anything changed on the node."""
    token = parse_token(opts.token)
    pins = parse_pins(opts.ca_cert_hashes)
    if not pins and not opts.unsafe_skip_ca_verification:
        raise JoinError("using token-based discovery without --discovery-token-ca-cert-hash can be unsafe; pass "
                        "--discovery-token-unsafe-skip-ca-verification to continue")
    report(f"[discovery] fetching cluster-info from {opts.endpoint}")
    info = await discover(opts.endpoint, token, pins, clock, timeout=opts.discovery_timeout)
    report(f"[discovery] cluster-info is signed with the token and its CA is pinned; API server {info.server}")
    _check_not_joined_elsewhere(layout, info)
    changed = install_agent(layout, opts.wheelhouse, report)
    changed |= write_node_files(layout, opts, info, token, report)
    start_unit(systemctl, changed, report)
    return changed
