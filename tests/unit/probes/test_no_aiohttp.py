"""A joined agent that runs httpGet probes, httpGet hooks and a manifest URL loads no aiohttp (issue 31: ~11 MiB)."""

from __future__ import annotations

import json
import subprocess
import sys

# Run in a fresh interpreter: every module of a joined agent is imported, then each HTTP client that used to
# load aiohttp lazily does one real request to a loopback server, and the modules loaded are listed.
_CODE = r"""
import asyncio, importlib, json, pkgutil, sys

import minikubelet.services
from minikubelet.cli import main
from minikubelet.agent import Agent
import minikubelet.kubeapi.rest, minikubelet.kubeapi.watch, minikubelet.server.kubelet_api
import minikubelet.sources.apiserver, minikubelet.status.api_sync, minikubelet.events.api_sink
from cri.docker import DockerRuntime
for info in pkgutil.iter_modules(minikubelet.services.__path__, "minikubelet.services."):
    importlib.import_module(info.name)
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import ContainerView
from minikubelet.metrics import Metrics
from minikubelet.sources.manifest_worker import InProcessParser
from minikubelet.sources.url import URLPodSource
from minikubelet.worker.hooks import run_hook
from probes.http import probe_headers, probe_http, probe_url

POD = b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}'

async def answer(reader, writer):
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(POD), POD))
    await writer.drain()
    writer.close()

async def run():
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    outcome = await probe_http(probe_url("HTTP", "127.0.0.1", port, "/healthz"), probe_headers([]), 2)
    assert outcome.output == POD.decode(), outcome
    await run_hook({"httpGet": {"path": "/stop", "port": port}}, runtime=None, clock=FakeClock(), container_id="c",
                   container=ContainerView.of({"name": "c"}), pod_ip="127.0.0.1", pod_desc="p_default(u)")
    published = []
    source = URLPodSource(f"http://127.0.0.1:{port}/pods", {}, "n", FakeClock(), Metrics(),
                          lambda _s, pods: published.append(pods), InProcessParser())
    await source.sync()
    assert published and published[-1][0]["metadata"]["name"] == "p-n", published
    server.close()

asyncio.run(run())
main(["version"])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("aiohttp", "aiodocker", "yarl", "multidict"))))
"""


def test_a_joined_agent_with_http_probes_hooks_and_a_manifest_url_loads_no_aiohttp() -> None:
    out = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == []
