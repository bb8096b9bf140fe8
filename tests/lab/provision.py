"""Puts minikubelet on a lab guest the way a user's machine gets it: the project's wheel and its
dependency wheels installed into a venv under /opt (the guests have no network), the test images
imported into the guest's Docker Engine, then the node joined to the test API server with a bootstrap
token and started by systemd."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import yaml

from tests.lab.guest import Guest

VENV = "/opt/minikubelet/venv"
CONFIG = "/var/lib/minikubelet/config.yaml"
BOOTSTRAP_KUBECONFIG = "/etc/kubernetes/bootstrap-kubelet.conf"
KUBECONFIG = "/etc/kubernetes/kubelet.conf"
CA_FILE = "/etc/kubernetes/pki/ca.crt"
UNIT = "/etc/systemd/system/minikubelet.service"
POD_PIDS_LIMIT = 512
REPO = Path(__file__).resolve().parents[2]

# The guests' Docker Engine uses the cgroupfs driver, as the agent's default cgroupDriver does: the
# agent refuses to start when the two differ (as the kubelet does).
DOCKER_DAEMON_JSON = b'{"exec-opts": ["native.cgroupdriver=cgroupfs"], "log-driver": "json-file"}\n'


async def install_agent(guest: Guest, wheels: Path) -> None:
    await guest.put_dir(wheels, "/root/wheels")
    await guest.sh(f"python3 -m venv {VENV} && {VENV}/bin/pip install -q --no-compile --disable-pip-version-check --no-index --find-links /root/wheels "
                   "minikubelet", timeout=900)


async def prepare_docker(guest: Guest, rundir: Path) -> None:
    await guest.put("/etc/docker/daemon.json", DOCKER_DAEMON_JSON)
    await guest.sh("systemctl restart docker && docker info --format '{{.CgroupDriver}} {{.CgroupVersion}}'",
                   timeout=300)
    sock = rundir / f"{guest.name}-docker.sock"
    forward = await guest.forward_socket(sock, "/run/docker.sock")
    try:
        env = {**os.environ, "DOCKER_HOST": f"unix://{sock}"}
        proc = await asyncio.create_subprocess_exec(
            str(REPO / "scripts/images/build"), env=env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise AssertionError(f"scripts/images/build into {guest.name} failed:\n{out.decode(errors='replace')}")
    finally:
        forward.terminate()
        await forward.wait()


def kubelet_config() -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": "unix:///run/docker.sock",
        "cgroupDriver": "cgroupfs",
        "staticPodPath": "/etc/kubernetes/manifests",
        "podPidsLimit": POD_PIDS_LIMIT,
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
    }


async def join_with_unit(guest: Guest, api_url: str, ca_pem: bytes, token: str) -> None:
    """The node's files as kubeadm's join leaves them, and the project's unit with their paths."""
    bootstrap = {
        "apiVersion": "v1", "kind": "Config", "current-context": "bootstrap",
        "clusters": [{"name": "lab", "cluster": {"server": api_url, "certificate-authority": CA_FILE}}],
        "users": [{"name": "bootstrap", "user": {"token": token}}],
        "contexts": [{"name": "bootstrap", "context": {"cluster": "lab", "user": "bootstrap"}}],
    }
    await guest.put(CA_FILE, ca_pem)
    await guest.put(BOOTSTRAP_KUBECONFIG, yaml.safe_dump(bootstrap).encode(), "0600")
    await guest.put(CONFIG, yaml.safe_dump(kubelet_config()).encode())
    unit = (REPO / "systemd/minikubelet.service").read_text()
    unit = unit.replace("/opt/minikubelet/.venv", VENV).replace(
        "--config /etc/minikubelet/config.yaml",
        f"--config {CONFIG} --bootstrap-kubeconfig {BOOTSTRAP_KUBECONFIG} --kubeconfig {KUBECONFIG}")
    await guest.put(UNIT, unit.encode())
    await guest.sh("mkdir -p /etc/kubernetes/manifests && systemctl daemon-reload && "
                   "systemctl enable --now minikubelet")
