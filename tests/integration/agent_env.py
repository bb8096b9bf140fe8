"""Runs the real agent process against the test Docker Engine (or, with MKL_TEST_RUNTIME=containerd, the CRI
containerd beside it), with its own dirs and cgroup root."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import pytest
import yaml

from cri.remote import RemoteRuntime
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError, Client

BUSYBOX = "minikubelet.test/busybox:1.36"
PAUSE = "registry.k8s.io/pause:3.10"


def docker_host() -> str:
    host = os.environ.get("MKL_TEST_DOCKER_HOST", "")
    if not host:
        if os.environ.get("CI") == "true":
            pytest.fail("MKL_TEST_DOCKER_HOST is not set: run the suite through scripts/test")
        pytest.skip("no test Docker Engine (run through scripts/test)")
    return host


def agent_runtime() -> str:
    """`MKL_TEST_RUNTIME`: "docker" (default) or "containerd", the runtime the agent under test runs on."""
    name = os.environ.get("MKL_TEST_RUNTIME", "docker") or "docker"
    if name not in ("docker", "containerd"):
        pytest.fail(f"MKL_TEST_RUNTIME={name!r}: docker or containerd")
    return name


def runtime_endpoint(docker: str) -> str:
    """The agent's containerRuntimeEndpoint: the test engine, or the test environment's CRI containerd."""
    if agent_runtime() == "docker":
        return docker
    endpoint = os.environ.get("MKL_TEST_CRI_ENDPOINT", "")
    if not endpoint:
        pytest.fail("MKL_TEST_RUNTIME=containerd needs MKL_TEST_CRI_ENDPOINT: run the suite through scripts/test")
    return endpoint


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AgentProcess:
    def __init__(self, base: Path, docker: str) -> None:
        self.base = base
        self.manifests = base / "manifests"
        self.root = base / "root"
        self.logs = base / "pod-logs"
        self.legacy_logs = base / "container-logs"  # never the host's /var/log/containers
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.node = f"mkl-{uuid.uuid4().hex[:6]}"
        self.cgroup_root = f"/mkltest-agent-{uuid.uuid4().hex[:8]}"
        self.config = base / "config.yaml"
        self.extra: dict[str, Any] = {}
        self.args: list[str] = []  # flags after --config (flag-only settings, kubeconfigs)
        self.docker_host = docker
        self.prefix: list[str] = []  # before the agent's command, e.g. nsenter into another node's netns
        self.host = "127.0.0.1"  # where its read-only port is reached (with "address" in `extra` to match)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base / "agent.log"
        self._log_fh: Any = None

    def write_config(self) -> None:
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "staticPodPath": str(self.manifests),
            "fileCheckFrequency": "2s",
            "address": "127.0.0.1",
            "readOnlyPort": self.port,
            "healthzPort": 0,
            "containerRuntimeEndpoint": runtime_endpoint(self.docker_host),
            "rootDir": str(self.root),
            "podLogsDir": str(self.logs),
            "legacyContainerLogsDir": str(self.legacy_logs),
            "cgroupRoot": self.cgroup_root,
            "hostnameOverride": self.node,
            **self.extra,
        }
        self.config.write_text(yaml.safe_dump(cfg))

    def cri_endpoint(self) -> str | None:
        """The CRI runtime the agent runs on (its pods must be removed there), None when it runs on Docker."""
        endpoint = str(self.extra.get("containerRuntimeEndpoint", runtime_endpoint(self.docker_host)))
        return None if endpoint == self.docker_host else endpoint

    def start(self) -> None:
        self.write_config()
        self._log_fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "minikubelet", "run", "--config", str(self.config), "--v", "2", *self.args],
            stdout=self._log_fh, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 15) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def put(self, filename: str, pod: dict[str, Any] | str) -> Path:
        """Write a manifest atomically (as editors and config managers do)."""
        p = self.manifests / filename
        tmp = self.manifests / f".{filename}.tmp"
        tmp.write_text(pod if isinstance(pod, str) else yaml.safe_dump(pod))
        os.replace(tmp, p)
        return p

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    async def get_json(self, path: str) -> Any:
        async with aiohttp.ClientSession() as s, s.get(self.url(path)) as r:
            return await r.json()

    async def get_text(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as s, s.get(self.url(path)) as r:
            return r.status, await r.text()

    async def pods(self) -> list[dict[str, Any]]:
        try:
            return list((await self.get_json("/pods"))["items"])
        except (aiohttp.ClientError, OSError):
            return []

    async def pod(self, name: str) -> dict[str, Any] | None:
        full = f"{name}-{self.node}"
        for p in await self.pods():
            if p["metadata"]["name"] == full:
                return p
        return None

    async def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 60.0,
                       interval: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"agent exited with {self.proc.returncode} while waiting for {what}:\n{self.log()[-4000:]}")
            last = await check()
            if last:
                return last
            await asyncio.sleep(interval)
        raise AssertionError(f"timed out waiting for {what}; last={json.dumps(last)[:2000]}\n--- agent log ---\n{self.log()[-6000:]}")

    async def wait_up(self, timeout: float = 20.0) -> None:
        async def healthy() -> bool:
            try:
                return (await self.get_text("/healthz"))[0] == 200
            except (aiohttp.ClientError, OSError):
                return False

        await self.wait_for("agent healthy", healthy, timeout)

    async def wait_pod(self, name: str, pred: Callable[[dict[str, Any]], bool], what: str,
                       timeout: float = 60.0) -> dict[str, Any]:
        async def check() -> Any:
            p = await self.pod(name)
            return p if p is not None and pred(p) else None

        return dict(await self.wait_for(f"pod {name}: {what}", check, timeout))

    async def wait_phase(self, name: str, phase: str, timeout: float = 60.0) -> dict[str, Any]:
        return await self.wait_pod(name, lambda p: p["status"].get("phase") == phase, f"phase {phase}", timeout)

    async def wait_gone(self, name: str, timeout: float = 60.0) -> None:
        async def check() -> bool:
            return await self.pod(name) is None

        await self.wait_for(f"pod {name} gone", check, timeout)


def cstatus(pod: dict[str, Any], name: str) -> dict[str, Any]:
    for key in ("containerStatuses", "initContainerStatuses"):
        for s in pod["status"].get(key) or []:
            if s["name"] == name:
                return dict(s)
    raise KeyError(name)


def container_id(pod: dict[str, Any], name: str) -> str:
    return str(cstatus(pod, name)["containerID"]).split("://", 1)[-1]


def simple_pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    for c in containers:
        c.setdefault("image", BUSYBOX)
        c.setdefault("imagePullPolicy", "IfNotPresent")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers, **spec}}


@pytest.fixture
async def docker() -> AsyncIterator[aiodocker.Docker]:
    d = aiodocker.Docker(url=docker_host())
    try:
        yield d
    finally:
        await d.close()


async def _remove_pod_containers(d: aiodocker.Docker, node: str, root: Path | None = None,
                                 cri_endpoint: str | None = None) -> None:
    """Remove what this agent's pods left: static pods (names end in -<node>) and any pod that has a directory
    under the agent's root dir (API pods have names of their own); other tests' containers stay."""
    uids = {p.name for p in (root / "pods").iterdir()} if root is not None and (root / "pods").is_dir() else set()
    for c in await d.containers.list(all=True, filters=json.dumps({"label": ["io.kubernetes.pod.uid"]})):
        labels = c._container.get("Labels", {})
        if not labels.get("io.kubernetes.pod.name", "").endswith(f"-{node}") and (
                labels.get("io.kubernetes.pod.uid") not in uids):
            continue
        try:
            await c.delete(force=True)
        except aiodocker.DockerError:
            pass
    if cri_endpoint is None and agent_runtime() == "containerd":
        cri_endpoint = runtime_endpoint("")
    if cri_endpoint is not None:
        await _remove_cri_pods(node, uids, cri_endpoint)


async def _remove_cri_pods(node: str, uids: set[str], endpoint: str) -> None:
    """The same for the CRI containerd: this agent's pod sandboxes (their containers go with them)."""
    runtime = RemoteRuntime(endpoint)
    try:
        for sandbox in await runtime.list_pod_sandboxes():
            if sandbox.metadata.name.endswith(f"-{node}") or sandbox.metadata.uid in uids:
                await runtime.remove_pod_sandbox(sandbox.id)
    finally:
        await runtime.close()


def _unmount_under(root: Path) -> None:
    """Volumes the agent mounted (tmpfs for Secrets, tokens, emptyDir Memory) and left with its pods."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mounts") as fh:
        points = [line.split()[1].replace("\\040", " ") for line in fh]
    for point in sorted((m for m in points if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def _remove_cgroups(cgroup_root: str) -> bool:
    """rmdir the agent's cgroup root in every hierarchy, leaf first; True when nothing is left."""
    base = Path("/sys/fs/cgroup")
    left = False
    for ctrl in base.iterdir() if base.is_dir() else []:
        top = ctrl / cgroup_root.lstrip("/")
        if not top.is_dir():
            continue
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            top.rmdir()
        except OSError:
            left = True
    return not left


@pytest.fixture
async def agent(tmp_path: Path, docker: aiodocker.Docker) -> AsyncIterator[AgentProcess]:
    a = AgentProcess(tmp_path, docker_host())
    try:
        yield a
    finally:
        await stop_and_clean(a, docker)


async def stop_and_clean(a: AgentProcess, docker: aiodocker.Docker) -> None:
    """Stop the agent, then remove what it left on purpose (pods outlive the agent): its pods' containers
    and its cgroup root."""
    a.stop()
    if a._log_fh is not None:
        a._log_fh.close()
    await _remove_pod_containers(docker, a.node, a.root, a.cri_endpoint())
    _unmount_under(a.root)
    # runc removes a deleted container's cgroups asynchronously (seconds on a busy host: 5 s of retries left a
    # pod cgroup behind now and then); retry until the tree is gone
    for _ in range(300):
        if _remove_cgroups(a.cgroup_root):
            break
        await asyncio.sleep(0.1)


class JoinedAgent(AgentProcess):
    """The agent with a node kubeconfig (a client certificate for system:node:<name>); `args`: more flags."""

    def __init__(self, base: Path, docker_host: str, api: ApiServer, *args: str) -> None:
        super().__init__(base, docker_host)
        self.kubeconfig = api.write_kubeconfig(base / "kubelet.conf", api.node_identity(self.node))
        self.args = ["--kubeconfig", str(self.kubeconfig), *args]


async def registered_node(admin: Client, name: str) -> dict[str, Any] | None:
    """The Node `name` once the API server has it (a check for `AgentProcess.wait_for`)."""
    try:
        node: dict[str, Any] = await admin.get("nodes", name)
    except ApiStatusError:
        return None
    return node


@contextlib.asynccontextmanager
async def running_api(workdir: Path, **options: Any) -> AsyncIterator[ApiServer]:
    """The test API server for one test; it fails the test if the agent wrote what the real one would refuse."""
    server = ApiServer(workdir, **options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
    assert server.violations == [], "writes the API server's decoder would refuse or prune"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with running_api(tmp_path / "api", history=500, max_watch_seconds=10) as server:
        yield server
