"""The agent joined to the test API server (tests/apiserver, the only API server these machines can run),
an admin's view of it (one HTTPS session: create, delete, list, watch), and the pure bookkeeping of the
cluster benches: when the API showed each pod Ready, and what the agent asked the API server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bench.common import docker_host
from tests.apiserver import ApiServer
from tests.integration.agent_env import BUSYBOX, JoinedAgent, stop_and_clean

Json = dict[str, Any]
NAMESPACE = "default"
# The agent's watch may fall behind while 100 pods start; a real apiserver's watch cache holds far more
# than the harness's default 1 000 changes, and a 410 relist would be a harness artefact here.
HISTORY = 100_000


def is_ready(pod: Json) -> bool:
    """The API shows the pod Running with condition Ready True (what `kubectl get pod` reads as READY)."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready


@dataclass
class ReadyTimes:
    """Per pod: when the API first showed it (ADDED) and when it first showed it Ready, from watch events."""

    created: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)
    resource_version: str = ""

    def observe(self, event: Json, now: float) -> None:
        obj = event.get("object") or {}
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        if event.get("type") not in ("ADDED", "MODIFIED"):
            return
        name = str((obj.get("metadata") or {}).get("name", ""))
        self.created.setdefault(name, now)
        if name not in self.ready and is_ready(obj):
            self.ready[name] = now

    def latencies(self) -> dict[str, float]:
        return {n: self.ready[n] - self.created[n] for n in self.ready}

    def all_ready(self, names: set[str]) -> bool:
        return names <= self.ready.keys()


_API_PATH = re.compile(r"^/apis?/(?:[^/]+/)?v[^/]+/(?:namespaces/[^/]+/)?(?P<plural>[^/?]+)(?:/[^/?]+(?:/(?P<sub>[^/?]+))?)?")


def request_kind(method: str, path_qs: str) -> str:
    """`PATCH pods/status`, `GET pods`, `POST events`, `WATCH pods`, `PUT leases`; other paths as they are."""
    path, _, query = path_qs.partition("?")
    m = _API_PATH.match(path)
    if m is None:
        return f"{method} {path}"
    if method == "GET" and re.search(r"(^|&)watch=(1|true)(&|$)", query):
        method = "WATCH"
    return f"{method} {m['plural']}" + (f"/{m['sub']}" if m["sub"] else "")


def tally(requests: list[tuple[str, str, str]], user: str) -> dict[str, int]:
    """How many requests of each kind `user` sent, most frequent first."""
    counts = Counter(request_kind(m, p) for u, m, p in requests if u == user)
    return dict(counts.most_common())


def peak_rate(times: list[float], window: float = 1.0) -> int:
    """The most requests seen in any `window` seconds (times sorted or not)."""
    s = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(s):
        while t - s[lo] > window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


class TimedRequests(list[tuple[str, str, str]]):
    """The API server's request log, with the time each request arrived (the harness keeps none)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: tuple[str, str, str]) -> None:
        self.times.append(time.monotonic())
        super().append(item)

    def since(self, start: float, user: str) -> tuple[list[tuple[str, str, str]], list[float]]:
        rows = [(r, t) for r, t in zip(self, self.times, strict=True) if t >= start and r[0] == user]
        return [r for r, _ in rows], [t for _, t in rows]


def agent_counts(exposition: str) -> dict[str, float]:
    """From the agent's /metrics: pod worker syncs by operation and runtime calls by type (cumulative)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == "kubelet_pod_worker_duration_seconds_count":
                out[f"pod worker {sample.labels.get('operation_type', '')}"] = sample.value
            elif sample.name == "kubelet_runtime_operations_total":
                out[f"runtime {sample.labels.get('operation_type', '')}"] = sample.value
    return out


def counts_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """What happened between two readings, the kinds that moved only, most frequent first."""
    moved = {k: int(v - before.get(k, 0.0)) for k, v in after.items() if v != before.get(k, 0.0)}
    return dict(sorted(moved.items(), key=lambda kv: (-kv[1], kv[0])))


def api_pod(name: str, node: str) -> Json:
    """A pod bound to `node` as the scheduler leaves it: one `sleep` container of a local image, no pull, no
    service account token (projected token volumes are not part of this measure)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sleep", "3600"]}]}}


class BenchAgent(JoinedAgent):
    """The real agent process with a node kubeconfig, and the API user it writes as."""

    def __init__(self, base: Path, docker: str, api: ApiServer) -> None:
        super().__init__(base, docker, api)
        self.user = f"system:node:{self.node}"
        self.profile: Path | None = None  # cProfile output (bench/profiled_agent.py), switched on by SIGUSR1

    def start(self) -> None:
        if self.profile is None:
            super().start()
            return
        self.write_config()
        self._log_fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.profiled_agent", str(self.profile), "-m", "minikubelet", "run",
             "--config", str(self.config), "--v", "2", *self.args],
            stdout=self._log_fh, stderr=subprocess.STDOUT, start_new_session=True,
        )


class Admin:
    """kubectl's side: one keep-alive HTTPS session as system:masters."""

    def __init__(self, api: ApiServer) -> None:
        self.url = api.url
        self._ssl = api.client_ssl(api.admin_identity())
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl, limit=100))

    async def close(self) -> None:
        await self._session.close()

    async def call(self, method: str, path: str, body: Json | None = None) -> Json:
        async with self._session.request(method, self.url + path, json=body) as resp:
            doc: Json = await resp.json()
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: {resp.status} {doc.get('message', doc)}")
            return doc

    async def create_pod(self, pod: Json) -> Json:
        return await self.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)

    async def delete_pod(self, name: str, grace: int) -> None:
        with contextlib.suppress(RuntimeError):  # already gone
            await self.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}",
                            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": grace})

    async def node_pods(self, node: str) -> Json:
        return await self.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=spec.nodeName%3D{node}")

    async def watch_pods(self, node: str, resource_version: str, on_event: Callable[[Json, float], None]) -> None:
        """Follow the node's pods from `resource_version` until cancelled, reconnecting as a client does."""
        rv = resource_version
        while True:
            path = (f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&allowWatchBookmarks=true"
                    f"&fieldSelector=spec.nodeName%3D{node}&resourceVersion={rv}")
            async with self._session.get(self.url + path, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"watch: {resp.status} {await resp.text()}")
                async for line in resp.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        raise RuntimeError(f"watch: {event.get('object')}")
                    on_event(event, time.monotonic())
                    rv = str((event.get("object", {}).get("metadata") or {}).get("resourceVersion") or rv)


@dataclass
class Cluster:
    api: ApiServer
    agent: BenchAgent
    admin: Admin
    requests: TimedRequests

    async def agent_counts(self) -> dict[str, float]:
        status, text = await self.agent.get_text("/metrics")
        if status != 200:
            raise RuntimeError(f"agent /metrics: {status}")
        return agent_counts(text)


def node_ready(node: Json) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


BENCH_MAX_WATCH_SECONDS = 3600.0


@contextlib.asynccontextmanager
async def joined_agent(profile: Path | None = None) -> AsyncIterator[Cluster]:
    """A fresh API server and the real agent joined to it, its Node Ready in the API; all stopped afterwards.
    `profile`: run the agent under bench/profiled_agent.py, writing there."""
    with tempfile.TemporaryDirectory(prefix="mkl-bench-cluster-") as tmp:
        # A real API server holds a watch for the timeoutSeconds the client asks (the agent's reflectors ask 5 to
        # 60 min, as upstream's); the harness's 60 s cap, there for the tests, would add ~3 watch requests a minute.
        api = ApiServer(Path(tmp) / "api", history=HISTORY, max_watch_seconds=BENCH_MAX_WATCH_SECONDS)
        requests = TimedRequests()
        api.handler.requests = requests
        await api.start()
        admin = Admin(api)
        agent = BenchAgent(Path(tmp) / "agent", docker_host(), api)
        agent.extra = {"fileCheckFrequency": "20s"}
        agent.profile = profile
        docker = aiodocker.Docker(url=agent.docker_host)
        try:
            agent.start()
            await agent.wait_up(30)

            async def ready() -> bool:
                try:
                    return node_ready(await admin.call("GET", f"/api/v1/nodes/{agent.node}"))
                except RuntimeError:
                    return False

            await agent.wait_for("the Node Ready in the API", ready, 60)
            yield Cluster(api, agent, admin, requests)
        finally:
            await stop_and_clean(agent, docker)
            await docker.close()
            await admin.close()
            await api.stop()


async def delete_all(c: Cluster, names: list[str], timeout: float = 300) -> float:
    """Delete the pods through the API (grace 1 s, as their spec) and wait until the API and the agent have
    none left; the seconds that took."""
    t0 = time.monotonic()
    await asyncio.gather(*(c.admin.delete_pod(n, 1) for n in names))

    async def none_left() -> bool:
        return not (await c.admin.node_pods(c.agent.node))["items"] and not await c.agent.pods()

    await c.agent.wait_for("the pods deleted", none_left, timeout)
    return time.monotonic() - t0
