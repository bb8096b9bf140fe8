"""`minikubelet reset`: undo `join`, as `kubeadm reset` does for a kubelet: stop the unit, stop and remove the
pods' containers, unmount and delete the agent's state, remove the pod cgroups, the node's files and the unit.
Running it again finds nothing left and changes nothing. The venv under /opt/minikubelet stays (reset runs
from it); `rm -rf /opt/minikubelet` removes it."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from minikubelet.install import layout as paths
from minikubelet.install.files import remove_path
from minikubelet.install.join import Report
from minikubelet.install.layout import Layout
from minikubelet.install.systemctl import ServiceManager

if TYPE_CHECKING:
    from cri.remote import RemoteRuntime

log = logging.getLogger("minikubelet.install.reset")
DEFAULT_RUNTIME_ENDPOINT = "unix:///var/run/docker.sock"
CGROUP_TOPS = ("kubepods", "kubepods.slice")


def _config(layout: Layout) -> dict[str, object]:
    try:
        with open(layout.path(paths.CONFIG), "rb") as f:
            doc = yaml.safe_load(f.read(1 << 20))
    except (OSError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


async def remove_pods(endpoint: str, report: Report) -> int:
    """Every pod container and sandbox the runtime knows, stopped and removed; how many were removed."""
    from cri.docker import DockerRuntime
    from cri.endpoint import speaks_docker_api

    runtime: DockerRuntime | RemoteRuntime
    if speaks_docker_api(endpoint):
        runtime = DockerRuntime(endpoint)
    else:  # the runtime the agent ran on (containerd, CRI-O) through the CRI, as `run` picks it
        from cri.remote import RemoteRuntime

        runtime = RemoteRuntime(endpoint)
    removed = 0
    try:
        await runtime.connect()
        for c in await runtime.list_containers():
            with contextlib.suppress(Exception):
                await runtime.stop_container(c.id, 10.0)
            await runtime.remove_container(c.id)
            removed += 1
        for s in await runtime.list_pod_sandboxes():
            with contextlib.suppress(Exception):
                await runtime.stop_pod_sandbox(s.id)
            await runtime.remove_pod_sandbox(s.id)
            removed += 1
    except Exception as e:
        report(f"[reset] could not remove the pods through {endpoint}: {e or type(e).__name__}")
    finally:
        await runtime.close()
    report(f"[reset] pods: {removed} containers and sandboxes removed")
    return removed


def unmount_under(directory: str, report: Report) -> int:
    """Mounts below `directory` (volumes: tmpfs for secrets, projected tokens), deepest first."""
    prefix = os.path.realpath(directory).rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            points = [line.split()[4].replace("\\040", " ") for line in f]
    except OSError:
        return 0
    inside = sorted({p for p in points if p.startswith(prefix)}, key=lambda p: p.count("/"), reverse=True)
    for point in inside:
        done = subprocess.run(["umount", "--lazy", point], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            report(f"[reset] umount {point}: {done.stderr.strip()}")
    return len(inside)


def remove_cgroups(cgroup_mount: Path, cgroup_root: str, report: Report) -> int:
    """rmdir of the pod cgroup trees, leaves first (v2: one hierarchy; v1: one per controller mount)."""
    hierarchies = [cgroup_mount] if (cgroup_mount / "cgroup.controllers").exists() else [
        d for d in (cgroup_mount.iterdir() if cgroup_mount.is_dir() else []) if d.is_dir() and not d.is_symlink()]
    removed = 0
    for hierarchy in hierarchies:
        for top in CGROUP_TOPS:
            base = hierarchy / cgroup_root.strip("/") / top
            if not base.is_dir():
                continue
            for dirpath, _dirs, _files in sorted(os.walk(base), key=lambda t: t[0].count("/"), reverse=True):
                try:
                    os.rmdir(dirpath)
                    removed += 1
                except OSError as e:
                    report(f"[reset] cgroup {dirpath}: {e.strerror}")
    report(f"[reset] cgroups: {removed} removed")
    return removed


async def reset(layout: Layout, systemctl: ServiceManager, report: Report, *,
                cgroup_mount: Path = Path("/sys/fs/cgroup"), remove_containers: bool = True) -> bool:
    """True when anything was there to undo."""
    unit_path = layout.path(paths.UNIT)
    config = _config(layout)
    changed = False
    if os.path.exists(unit_path):
        systemctl.stop(paths.UNIT_NAME)
        systemctl.disable(paths.UNIT_NAME)
        report(f"[reset] {paths.UNIT_NAME} stopped and disabled")
    if remove_containers and (config or os.path.exists(layout.path(paths.ROOT_DIR))):
        endpoint = str(config.get("containerRuntimeEndpoint") or DEFAULT_RUNTIME_ENDPOINT)
        changed |= await remove_pods(endpoint, report) > 0
    root_dir = layout.path(str(config.get("rootDir") or paths.ROOT_DIR))
    unmount_under(root_dir, report)
    changed |= remove_cgroups(cgroup_mount, str(config.get("cgroupRoot") or "/"), report) > 0
    for node_path in (root_dir, layout.path(paths.ROOT_DIR), layout.path(paths.KUBECONFIG),
                      layout.path(paths.BOOTSTRAP_KUBECONFIG), layout.path(paths.CA_FILE), unit_path):
        if remove_path(node_path):
            report(f"[reset] removed {node_path}")
            changed = True
    if changed:
        systemctl.daemon_reload()
    return changed
