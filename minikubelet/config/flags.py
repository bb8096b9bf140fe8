"""Command-line flags, named as the kubelet's, mapped onto KubeletConfig attribute names."""

from __future__ import annotations

import argparse
from typing import Any

# (flag, KubeletConfig attribute, argparse type, help). Values stay raw strings/ints here;
# config.load_config parses and validates them exactly like file values, so an error names
# the flag and a flag that is not given never overrides the file.
_RUN_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--hostname-override", "hostname_override", str, "Use this name as the node name instead of the hostname."),
    ("--pod-manifest-path", "static_pod_path", str, "Directory of static pod manifests (staticPodPath)."),
    ("--root-dir", "root_dir", str, "Directory for the agent's state (volumes, checkpoints)."),
    ("--kubeconfig", "kubeconfig", str, "Kubeconfig for the API server; without it the agent runs standalone."),
    ("--v", "verbosity", int, "Log verbosity (0-10)."),
    ("--container-runtime-endpoint", "container_runtime_endpoint", str, "Runtime socket, e.g. unix:///var/run/docker.sock."),
    ("--pod-infra-container-image", "pod_infra_container_image", str, "Image of the pod sandbox (pause) container."),
    ("--read-only-port", "read_only_port", int, "Port of the read-only HTTP server (0 disables it)."),
    ("--address", "address", str, "IP address the read-only server binds to."),
    ("--healthz-port", "healthz_port", int, "Port of the healthz endpoint (0 disables it)."),
    ("--cgroup-driver", "cgroup_driver", str, "cgroupfs or systemd."),
    ("--max-pods", "max_pods", int, "Maximum number of pods on this node."),
    ("--file-check-frequency", "file_check_frequency", str, "Re-list period of the static pod directory (e.g. 20s)."),
    ("--sync-frequency", "sync_frequency", str, "Pod resync period (e.g. 1m)."),
)


def build_parser() -> argparse.ArgumentParser:
    """`minikubelet run [flags]` and `minikubelet version`."""
    parser = argparse.ArgumentParser(prog="minikubelet", description="A Kubernetes node agent.", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,version}")
    run = sub.add_parser("run", help="Run the node agent.", allow_abbrev=False)
    run.add_argument("--config", default=None, help="KubeletConfiguration file (kubelet.config.k8s.io/v1beta1).")
    for flag, attr, kind, help_text in _RUN_FLAGS:
        names = [flag, "-v"] if flag == "--v" else [flag]
        run.add_argument(*names, dest=attr, type=kind, default=None, help=help_text)
    sub.add_parser("version", help="Print the version and exit.")
    return parser


def flags_to_overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """The flags the user gave, as {KubeletConfig attribute: raw value}; absent flags are left out."""
    out: dict[str, Any] = {}
    for _, attr, _, _ in _RUN_FLAGS:
        value = getattr(ns, attr, None)
        if value is not None:
            out[attr] = value
    return out
