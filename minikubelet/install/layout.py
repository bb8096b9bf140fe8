"""Where `minikubelet join` puts things, kubeadm's paths where kubeadm has one (docs/install.md).

Every path is absolute on the node; `Layout(root)` maps it under a prefix so that tests (and `--root`)
install into a directory instead of the machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

UNIT_NAME = "minikubelet.service"
BOOTSTRAP_KUBECONFIG = "/etc/kubernetes/bootstrap-kubelet.conf"
KUBECONFIG = "/etc/kubernetes/kubelet.conf"
CA_FILE = "/etc/kubernetes/pki/ca.crt"
MANIFESTS = "/etc/kubernetes/manifests"
ROOT_DIR = "/var/lib/minikubelet"
CONFIG = "/var/lib/minikubelet/config.yaml"
FLAGS_ENV = "/var/lib/minikubelet/minikubelet-flags.env"
UNIT = "/etc/systemd/system/minikubelet.service"
VENV = "/opt/minikubelet/venv"


@dataclass(frozen=True)
class Layout:
    root: str = "/"

    def path(self, node_path: str) -> str:
        """`node_path` under the prefix."""
        return os.path.join(self.root, node_path.lstrip("/"))

    @property
    def on_machine(self) -> bool:
        return os.path.realpath(self.root) == "/"
