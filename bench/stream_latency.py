"""stream-latency: exec round trip through the kubelet API (WebSocket v5 and SPDY/3.1, a new TLS connection per
exec as the API server opens one) beside `docker exec` on the same engine (its Engine API calls, and the CLI);
and log-follow latency: a line written to the container's stdout -> seen on a followed `/containerLogs`, beside
Docker's own followed logs of the same container."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp

from bench.common import docker_host, running_agent, sleeper_pod, summary, table, write_result
from tests import spdy_client, ws_client
from tests.integration.agent_env import container_id, free_port
from tests.integration.test_agent_kubelet_api import write_pki

ECHO = "command=echo&command=x&output=1&error=1"
MARK = re.compile(rb"mark-(\d+)")


async def _docker_api_exec(docker: aiodocker.Docker, cid: str) -> bytes:
    """What `docker exec` does: create, start attached (the hijacked stream), inspect for the exit code."""
    container = await docker.containers.get(cid)
    execution = await container.exec(["echo", "x"], stdout=True, stderr=True)
    out = b""
    async with execution.start(detach=False) as stream:
        while (msg := await stream.read_out()) is not None:
            out += msg.data
    if (await execution.inspect())["ExitCode"] != 0:
        raise RuntimeError("docker exec failed")
    return out


async def _docker_cli_exec(cid: str) -> bytes:
    proc = await asyncio.create_subprocess_exec("docker", "-H", docker_host(), "exec", cid, "echo", "x",
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError("docker exec failed")
    return out


async def exec_round_trips(samples: int, port: int, ctx: Any, path: str, docker: aiodocker.Docker,
                           cid: str) -> dict[str, list[float]]:
    async def ws() -> bytes:
        out = await ws_client.run(f"wss://127.0.0.1:{port}{path}", ctx)
        assert out.status.get("status") == "Success", out.status
        return out.stdout

    async def spdy() -> bytes:
        out = await spdy_client.run("127.0.0.1", port, path, ctx)
        assert out.status.get("status") == "Success", out.status
        return out.stdout

    ways: dict[str, Callable[[], Awaitable[bytes]]] = {
        "kubelet API, WebSocket v5": ws, "kubelet API, SPDY/3.1": spdy,
        "docker Engine API exec": lambda: _docker_api_exec(docker, cid), "docker exec (CLI)": lambda: _docker_cli_exec(cid)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for name, run in ways.items():  # warm-up: connections, imports, the CLI binary in the page cache
        assert await run() == b"x\n", name
    for _ in range(samples):  # interleaved, so drift on a shared machine hits every way alike
        for name, run in ways.items():
            t0 = time.perf_counter()
            await run()
            times[name].append(time.perf_counter() - t0)
    return times


async def _follow(lines: Any, seen: dict[int, float], samples: int) -> None:
    async for line in lines:
        if (m := MARK.search(line)) is not None:
            seen[int(m.group(1))] = time.perf_counter()
            if len(seen) >= samples:
                return


async def log_follow(samples: int, interval: float, port: int, ctx: Any, path: str, docker: aiodocker.Docker,
                     cid: str) -> dict[str, list[float]]:
    """Writes `mark-N` lines straight into the container's stdout pipe (/proc/<pid>/fd/1, as its process would)
    and times their arrival on both followed streams."""
    pid = (await (await docker.containers.get(cid)).show())["State"]["Pid"]
    kubelet_seen: dict[int, float] = {}
    docker_seen: dict[int, float] = {}
    written: dict[int, float] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:
        async with http.get(f"https://127.0.0.1:{port}{path}?follow=true&tailLines=0", ssl=ctx) as kubelet, \
                DockerLogLines(docker, cid) as docker_lines:
            readers = [asyncio.create_task(_follow(kubelet.content, kubelet_seen, samples)),
                       asyncio.create_task(_follow(docker_lines, docker_seen, samples))]
            await asyncio.sleep(1.0)
            with open(f"/proc/{pid}/fd/1", "wb", buffering=0) as stdout:
                for i in range(samples):
                    written[i] = time.perf_counter()
                    stdout.write(f"mark-{i}\n".encode())
                    await asyncio.sleep(interval)
            await asyncio.wait(readers, timeout=10)
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
    return {"kubelet API /containerLogs?follow": [kubelet_seen[i] - written[i] for i in written if i in kubelet_seen],
            "docker logs --follow (Engine API)": [docker_seen[i] - written[i] for i in written if i in docker_seen]}


class DockerLogLines:
    """Docker's followed log stream of a tty-less container, as lines (the 8-byte frame headers dropped)."""

    def __init__(self, docker: aiodocker.Docker, cid: str) -> None:
        self._docker, self._cid = docker, cid
        self._response: Any = None

    async def __aenter__(self) -> DockerLogLines:
        self._response = await self._docker._do_query(
            f"containers/{self._cid}/logs", "GET", params={"follow": 1, "stdout": 1, "tail": 0},
            timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._response.close()

    def __aiter__(self) -> DockerLogLines:
        return self

    async def __anext__(self) -> bytes:
        content = self._response.content
        try:
            header = await content.readexactly(8)
        except asyncio.IncompleteReadError as exc:
            raise StopAsyncIteration from exc
        return bytes(await content.readexactly(int.from_bytes(header[4:8], "big")))


async def main(samples: int, lines: int, interval: float) -> None:
    docker = aiodocker.Docker(url=docker_host())
    try:
        with tempfile.TemporaryDirectory(prefix="mkl-bench-pki-") as pki:
            ca, ctx = write_pki(Path(pki))
            port = free_port()
            extra = {"port": port, "authentication": {"x509": {"clientCAFile": str(ca)}},
                     "authorization": {"mode": "AlwaysAllow"}}
            async with running_agent(extra) as agent:
                agent.put("shell.yaml", sleeper_pod("shell"))
                pod = await agent.wait_pod("shell", lambda p: p["status"].get("phase") == "Running", "Running", 120)
                ns, name, cid = pod["metadata"]["namespace"], pod["metadata"]["name"], container_id(pod, "main")
                await asyncio.sleep(1)
                rtt = await exec_round_trips(samples, port, ctx, f"/exec/{ns}/{name}/main?{ECHO}", docker, cid)
                follow = await log_follow(lines, interval, port, ctx, f"/containerLogs/{ns}/{name}/main", docker,
                                          cid)
    finally:
        await docker.close()
    rows = []
    result: dict[str, Any] = {"cpus": os.cpu_count(), "exec_round_trip": {}, "log_follow": {}}
    for kind, data in (("exec_round_trip", rtt), ("log_follow", follow)):
        for way, values in data.items():
            s = summary([v * 1000 for v in values])
            result[kind][way] = s
            rows.append([kind.replace("_", " "), way, s["n"], s["p50"], s["p90"], s["p99"], s["max"]])
    print(table(["what", "way", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"], rows))
    print("results:", write_result("stream-latency", result))
