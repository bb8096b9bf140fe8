"""Image pulls from a real registry (Debian's docker-registry on the test netns loopback)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiodocker
import pytest

from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import BUSYBOX, AgentProcess, cstatus, simple_pod
from tests.integration.runtime_view import RuntimeView

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker
runtime_view = views.runtime_view


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    # scripts/testenv unpacks Debian's docker-registry into its data dir (no host service); an installed one works too
    binary = os.environ.get("MKL_TEST_REGISTRY_BIN") or shutil.which("docker-registry")
    if binary is None or not os.access(binary, os.X_OK):
        pytest.fail(f"no docker-registry binary at {binary} (scripts/testenv up unpacks it)")
    port = agent_env.free_port()
    cfg = tmp_path / "registry.yml"
    cfg.write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {tmp_path / 'data'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n")
    proc = subprocess.Popen([binary, "serve", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("docker-registry exited at start")
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
async def pushed(registry: str, docker: aiodocker.Docker, runtime_view: RuntimeView) -> AsyncIterator[str]:
    ref = f"{registry}/mkl/busybox"
    await docker.images.tag(BUSYBOX, ref, tag="pulltest")
    await docker.images.push(ref, tag="pulltest")
    await docker.images.delete(f"{ref}:pulltest")
    try:
        yield f"{ref}:pulltest"
    finally:
        try:
            await docker.images.delete(f"{ref}:pulltest", force=True)
        except aiodocker.DockerError:
            pass
        if runtime_view.name != "docker":
            await _forget_names(ref)


async def _forget_names(repo: str) -> None:
    """Only the names the pull added to the CRI containerd (the tag and its repo digest), not the image: the CRI
    RemoveImage removes an image with every name it has, and this one is the test busybox itself. A repo digest
    left behind would also become busybox's imageID in every later test."""
    ctr = ["ctr", "-a", agent_env.runtime_endpoint("").removeprefix("unix://"), "-n", "k8s.io", "images"]
    listing = await asyncio.create_subprocess_exec(*ctr, "ls", "-q", stdout=asyncio.subprocess.PIPE)
    out, _ = await listing.communicate()
    names = [n for n in out.decode().split() if n.startswith((f"{repo}:", f"{repo}@"))]
    if names:
        proc = await asyncio.create_subprocess_exec(*ctr, "rm", *names, stdout=asyncio.subprocess.DEVNULL)
        assert await proc.wait() == 0, f"ctr images rm {names}"


async def test_pull_from_registry(agent: AgentProcess, pushed: str, runtime_view: RuntimeView) -> None:
    assert await runtime_view.runtime.image_status(pushed) is None  # not on the node before the pod asks for it
    agent.put("pulled.yaml", simple_pod("pulled", [{"name": "main", "image": pushed, "imagePullPolicy": "Always",
                                                    "command": ["sleep", "3600"]}]))
    agent.start()
    p = await agent.wait_pod("pulled", lambda p: p["status"].get("phase") == "Running", "Running after a pull")
    cs = cstatus(p, "main")
    assert cs["image"] == pushed
    # the repo digest the pull gave: Docker's `docker-pullable://` form, containerd's plain reference
    pullable = "docker-pullable://" if runtime_view.name == "docker" else ""
    assert cs["imageID"].startswith(f"{pullable}{pushed.rsplit(':', 1)[0]}@sha256:"), cs["imageID"]
    evs = (await agent.get_json(f"/debug/events?uid={p['metadata']['uid']}"))["items"]
    msgs = [(e["reason"], e["message"]) for e in evs]
    assert ("Pulling", f'Pulling image "{pushed}"') in msgs
    pulled = next(m for r, m in msgs if r == "Pulled")
    assert pulled.startswith(f'Successfully pulled image "{pushed}" in ') and "including waiting" in pulled
    assert "Image size: " in pulled
