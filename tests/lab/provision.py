"""Puts minikubelet on a lab guest the way a user's machine gets it: the test images imported into the
guest's Docker Engine (the guests have no registry), then the project's one worker provisioning script
(`lab/provision-worker.sh`, shared with the Vagrant and Multipass labs) with the wheelhouse copied in:
the venv under /opt, `minikubelet join` with a bootstrap token and the CA's hash, the systemd unit."""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path

import yaml
from cryptography import x509

from minikubelet.install.ca_pin import spki_hash
from tests.lab.guest import Guest, GuestError

POD_PIDS_LIMIT = 512
CLUSTER_CIDR = "10.244.0.0/16"
# one guest on each driver: the cgroupfs checks run on lab-1, the systemd slices on lab-2
CGROUP_DRIVERS = {"lab-1": "cgroupfs", "lab-2": "systemd"}
REPO = Path(__file__).resolve().parents[2]

# On top of what join writes: a pod PID limit to read back as pids.max, and quicker status reports
KUBELET_CONFIG_PATCH = {"podPidsLimit": POD_PIDS_LIMIT, "nodeStatusUpdateFrequency": "5s", "syncFrequency": "10s"}


async def import_test_images(guest: Guest, rundir: Path) -> None:
    """scripts/images/build into the guest's engine, through an ssh-forwarded /run/docker.sock."""
    await guest.sh("until systemctl is-active --quiet docker.socket docker.service; do sleep 1; done", timeout=600)
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


def ca_cert_hash(ca_pem: bytes) -> str:
    return spki_hash(x509.load_pem_x509_certificate(ca_pem))


async def provision_worker(guest: Guest, wheels: Path, api_url: str, ca_pem: bytes, token: str) -> str:
    """lab/provision-worker.sh on the guest, as a user runs it; its output."""
    await guest.put_dir(wheels, "/root/wheelhouse")
    await guest.put("/root/provision-worker.sh", (REPO / "lab/provision-worker.sh").read_bytes(), "0755")
    await guest.put("/root/kubelet-config-patch.yaml", yaml.safe_dump(KUBELET_CONFIG_PATCH).encode())
    argv = ["/root/provision-worker.sh", "--api", api_url, "--token", token, "--ca-cert-hash", ca_cert_hash(ca_pem),
            "--wheelhouse", "/root/wheelhouse", "--node-ip", guest.ip, "--node-name", guest.name,
            "--cgroup-driver", CGROUP_DRIVERS[guest.name],
            "--", "--kubelet-config-patch", "/root/kubelet-config-patch.yaml",
            "--pod-network", "host-gw", "--non-masquerade-cidr", CLUSTER_CIDR]
    # byte-compiling every installed module costs minutes under TCG; the agent compiles what it imports
    r = await guest.run("PIP_NO_COMPILE=1 " + shlex.join(argv), timeout=1200)
    if r.rc != 0:
        journal = (await guest.run("journalctl -u minikubelet --no-pager -n 80 -o cat")).out
        raise GuestError(f"{guest.name}: lab/provision-worker.sh exited {r.rc}:\n{r.out[-3000:]}\n"
                         f"--- agent journal ---\n{journal[-6000:]}")
    return r.out
