"""cri-calls: CRI round trips through the agent's CRI client (MKL_TEST_RUNTIME=containerd): Version, ListContainers
and ContainerStatus one after another, and ContainerStatus of N containers at once, with N pods in place; beside
the latency, the bench process's CPU time per call (the client's own cost, less sensitive to machine load)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from bench.common import docker_host, summary, table, write_result
from cri.remote import RemoteRuntime
from cri.remote.client import Channel
from cri.remote.v1 import api_pb2 as pb
from cri.types import ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from tests.integration.agent_env import BUSYBOX, runtime_endpoint


async def _timed(calls: int, one: Callable[[], Awaitable[Any]]) -> list[float]:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await one()
        times.append(time.perf_counter() - t0)
    return times


async def main(pods: int, calls: int) -> None:
    endpoint = runtime_endpoint(docker_host())
    rt = RemoteRuntime(endpoint)
    tag = uuid.uuid4().hex[:6]
    sandboxes: list[str] = []
    containers: list[str] = []

    async def make(i: int) -> None:
        pod = PodSandboxConfig(PodMeta(f"bench-{tag}-{i}", "default", str(uuid.uuid4())), hostname=f"bench-{i}",
                               labels={"mkl-bench": tag})
        sandbox_id = await rt.run_pod_sandbox(pod)
        sandboxes.append(sandbox_id)
        containers.append(await rt.create_container(
            sandbox_id, ContainerConfig(ContainerMeta("main"), BUSYBOX, command=("sleep", "3600")), pod))

    channel = Channel(endpoint)
    try:
        await asyncio.gather(*(make(i) for i in range(pods)))
        stub = channel.runtime
        await stub.Version(pb.VersionRequest())  # the connection is made outside the timed calls
        cases: dict[str, Callable[[], Awaitable[Any]]] = {
            "Version": lambda: stub.Version(pb.VersionRequest()),
            "ListContainers": lambda: stub.ListContainers(pb.ListContainersRequest()),
            "ContainerStatus (verbose)": lambda: stub.ContainerStatus(
                pb.ContainerStatusRequest(container_id=containers[0], verbose=True)),
            f"ContainerStatus x{pods} at once": lambda: asyncio.gather(*(
                stub.ContainerStatus(pb.ContainerStatusRequest(container_id=c, verbose=True)) for c in containers)),
        }
        rows, data = [], {}
        for name, one in cases.items():
            cpu0 = time.process_time()
            s = summary(await _timed(calls, one))
            s["cpu_per_call"] = (time.process_time() - cpu0) / calls
            data[name] = s
            rows.append([name, calls, s["p50"] * 1000, s["p90"] * 1000, s["p99"] * 1000, s["cpu_per_call"] * 1000])
    finally:
        await channel.close()
        await asyncio.gather(*(rt.remove_pod_sandbox(s) for s in sandboxes), return_exceptions=True)
        await rt.close()
    print(table(["call", "calls", "p50 ms", "p90 ms", "p99 ms", "client CPU ms/call"], rows))
    print("results:", write_result("cri-calls", {"pods": pods, "calls": calls, "cases": data}))
