"""`minikubelet join` and `minikubelet reset`: their flags (kubeadm's names) and what the CLI runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from minikubelet.base.clock import RealClock
from minikubelet.install.bootstrap_token import TokenError
from minikubelet.install.ca_pin import PinError
from minikubelet.install.discovery import DEFAULT_TIMEOUT, DiscoveryError
from minikubelet.install.join import JoinError, JoinOptions, join, read_config_patch
from minikubelet.install.layout import Layout
from minikubelet.install.reset import reset
from minikubelet.install.systemctl import RecordingSystemctl, ServiceManager, Systemctl, SystemctlError


def add_commands(sub: Any) -> None:
    j = sub.add_parser("join", help="Join this machine to a cluster as a node (as kubeadm join) and start the service.",
                       allow_abbrev=False)
    j.add_argument("endpoint", help="API server, https://HOST:6443 or HOST:6443.")
    j.add_argument("--token", required=True, help="Bootstrap token <id>.<secret> (kubeadm token create).")
    j.add_argument("--discovery-token-ca-cert-hash", dest="ca_hashes", action="append", default=[],
                   metavar="sha256:HEX", help="Pin of the cluster CA's public key (repeatable).")
    j.add_argument("--discovery-token-unsafe-skip-ca-verification", dest="unsafe", action="store_true",
                   help="Trust the CA in cluster-info without a pin (still checks the token's signature).")
    j.add_argument("--discovery-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="How long to wait for a signed cluster-info (default 300).")
    j.add_argument("--node-name", default="", help="Node name (default: the hostname).")
    j.add_argument("--node-ip", default="", help="The node's InternalIP (default: the default route's address).")
    j.add_argument("--cluster-dns", default="", help="Comma-separated DNS service IPs for pods (kubeadm: 10.96.0.10).")
    j.add_argument("--cluster-domain", default="cluster.local")
    j.add_argument("--cgroup-driver", choices=("cgroupfs", "systemd"), default="cgroupfs",
                   help="Must match the container runtime's (docker info: Cgroup Driver).")
    j.add_argument("--container-runtime-endpoint", default="", metavar="URL",
                   help="Runtime socket (default unix:///var/run/docker.sock).")
    j.add_argument("--kubelet-config-patch", default="", metavar="FILE",
                   help="YAML mapping of KubeletConfiguration fields written on top of join's (e.g. podPidsLimit).")
    j.add_argument("--pod-network", choices=("", "host-gw"), default="",
                   help="The agent's pod network: host-gw (a bridge on the Node's podCIDR, routes to the other Nodes').")
    j.add_argument("--non-masquerade-cidr", default="", metavar="CIDR",
                   help="With --pod-network=host-gw: the cluster CIDR (pod traffic leaving it is masqueraded).")
    j.add_argument("--wheelhouse", default="", metavar="DIR",
                   help="Install or upgrade the agent in /opt/minikubelet/venv from these wheels (offline).")
    _common(j)
    r = sub.add_parser("reset", help="Undo join: stop the service and the pods, remove state, cgroups and the unit.",
                       allow_abbrev=False)
    _common(r)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default="/", metavar="DIR",
                   help="Install under DIR instead of / (systemctl is then not called, only printed).")
    p.add_argument("--dry-run", action="store_true", help="Do not call systemctl; print what would be called.")


def _systemctl(ns: argparse.Namespace, layout: Layout) -> ServiceManager:
    if ns.dry_run or not layout.on_machine:
        return RecordingSystemctl()
    return Systemctl()


def _say(line: str) -> None:
    print(line, flush=True)


async def run_command(ns: argparse.Namespace) -> int:
    layout = Layout(ns.root)
    systemctl = _systemctl(ns, layout)
    try:
        if ns.command == "join":
            opts = JoinOptions(
                endpoint=ns.endpoint, token=ns.token, ca_cert_hashes=list(ns.ca_hashes),
                unsafe_skip_ca_verification=ns.unsafe, node_name=ns.node_name, node_ip=ns.node_ip,
                cluster_dns=[x for x in ns.cluster_dns.split(",") if x], cluster_domain=ns.cluster_domain,
                cgroup_driver=ns.cgroup_driver,
                container_runtime_endpoint=ns.container_runtime_endpoint,
                config_patch=read_config_patch(ns.kubelet_config_patch) if ns.kubelet_config_patch else {},
                wheelhouse=ns.wheelhouse, discovery_timeout=ns.discovery_timeout,
                pod_network=ns.pod_network, non_masquerade_cidr=ns.non_masquerade_cidr)
            changed = await join(opts, layout, systemctl, RealClock(), _say)
            _say("This node has joined the cluster." if changed else "Nothing changed: this node had already joined.")
        else:
            changed = await reset(layout, systemctl, _say,
                                  cgroup_mount=Path(layout.path("/sys/fs/cgroup")))
            _say("Reset done." if changed else "Nothing to reset.")
    except (TokenError, PinError, DiscoveryError, JoinError, SystemctlError, OSError) as e:
        print(f"error: {ns.command}: {e}", file=sys.stderr)
        return 1
    if isinstance(systemctl, RecordingSystemctl):
        for call in systemctl.calls:
            _say(f"[dry-run] systemctl {call}")
    return 0
