"""status-latency: a container is killed -> time until /pods shows it terminated, beside the runtime's own event
latency in the same run: from the same kill call until the runtime's event stream reports the exit (Docker
`/events` `die`, or with MKL_TEST_RUNTIME=containerd CRI `GetContainerEvents` CONTAINER_STOPPED_EVENT).

A third row: from the kill until the runtime first answers a status read saying the container is no longer
running, the read sent the moment the event arrived (Docker inspect; CRI ContainerStatus). Docker sends `die`
before it has finished its own cleanup and recorded the state: its listing still says running and an inspect
waits on the container's lock, so no client, the agent included, can see the exit before this row's time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiodocker
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from bench.common import docker_host, running_agent, sleeper_pod, summary, table, write_result
from cri.remote.client import Channel
from cri.remote.v1 import api_pb2 as pb
from tests.integration.agent_env import AgentProcess, agent_runtime, container_id, cstatus, runtime_endpoint


class ExitWatch:
    """Arrival times (monotonic) of the runtime's exit events, by container id; with `read_state`, also when
    a status read sent at the event first said the container was not running (`readable`)."""

    def __init__(self, read_state: Callable[[str], Awaitable[bool]] | None = None) -> None:
        self.arrived: dict[str, float] = {}
        self.readable: dict[str, float] = {}
        self._read_state = read_state
        self._reads: set[asyncio.Task[None]] = set()
        self._waiters: dict[str, asyncio.Event] = {}
        self._read_done: dict[str, asyncio.Event] = {}

    def seen(self, cid: str) -> None:
        if cid in self.arrived:
            return
        self.arrived[cid] = time.monotonic()
        if self._read_state is not None:
            self._read_done.setdefault(cid, asyncio.Event())
            task = asyncio.create_task(self._read(cid))
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)
        if (w := self._waiters.get(cid)) is not None:
            w.set()

    async def _read(self, cid: str) -> None:
        assert self._read_state is not None
        try:
            with contextlib.suppress(Exception):
                for _ in range(1000):
                    if not await self._read_state(cid):
                        self.readable[cid] = time.monotonic()
                        return
                    await asyncio.sleep(0.001)
        finally:
            self._read_done[cid].set()

    async def wait_readable(self, cid: str, timeout: float) -> float | None:
        """When the runtime first said the container was not running; None if no read said so in time."""
        done = self._read_done.setdefault(cid, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout)
        return self.readable.get(cid)

    async def wait(self, cid: str, timeout: float) -> float:
        if cid not in self.arrived:
            w = self._waiters.setdefault(cid, asyncio.Event())
            await asyncio.wait_for(w.wait(), timeout)
        return self.arrived[cid]


async def _docker_exits(url: str, watch: ExitWatch, ready: asyncio.Event) -> None:
    docker = aiodocker.Docker(url=url)
    try:
        filters = json.dumps({"type": ["container"], "event": ["die"]})
        async with docker._query("events", params={"filters": filters}, timeout=None) as resp:
            ready.set()
            async for line in resp.content:
                if line.strip():
                    ev = json.loads(line)
                    watch.seen(str(ev.get("id") or ev.get("Actor", {}).get("ID", "")))
    finally:
        await docker.close()


async def _cri_exits(endpoint: str, watch: ExitWatch, ready: asyncio.Event) -> None:
    channel = Channel(endpoint)
    try:
        try:
            async with channel.runtime.GetContainerEvents.open() as stream:
                await stream.send_message(pb.GetEventsRequest(), end=True)
                ready.set()
                async for ev in stream:
                    if ev.container_event_type == pb.CONTAINER_STOPPED_EVENT:
                        watch.seen(ev.container_id)
        except GRPCError as e:
            if e.status is not Status.UNIMPLEMENTED:
                raise
            await _containerd_exits(endpoint, watch, ready)
    finally:
        await channel.close()


async def _containerd_exits(endpoint: str, watch: ExitWatch, ready: asyncio.Event) -> None:
    """containerd before 1.7 has no CRI event stream: its own event service (`ctr events`, topic /tasks/exit)
    is where it reports the exit."""
    proc = await asyncio.create_subprocess_exec(
        "ctr", "--address", endpoint.removeprefix("unix://"), "events", stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        await asyncio.sleep(0.5)  # ctr prints nothing when subscribed
        ready.set()
        async for raw in proc.stdout:
            line = raw.decode(errors="replace")
            if " /tasks/exit " in line:
                ev = json.loads(line[line.index("{"):])
                watch.seen(str(ev.get("container_id", "")))
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def exit_events(watch: ExitWatch) -> AsyncIterator[None]:
    ready = asyncio.Event()
    if agent_runtime() == "containerd":
        task = asyncio.create_task(_cri_exits(runtime_endpoint(docker_host()), watch, ready))
    else:
        task = asyncio.create_task(_docker_exits(docker_host(), watch, ready))
    try:
        done, _ = await asyncio.wait([task, asyncio.ensure_future(ready.wait())], timeout=30,
                                     return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()  # the subscription failed: say why
        if not ready.is_set():
            raise SystemExit("status-latency: the runtime's event stream did not open within 30 s")
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


Kill = Callable[[str], Awaitable[None]]
Running = Callable[[str], Awaitable[bool]]


async def _killer() -> tuple[Kill, Running, Callable[[], Awaitable[None]]]:
    """The kill call (SIGKILL, no grace) on the runtime the agent runs on, its status read (is the container
    still running?), and how to close them."""
    if agent_runtime() == "containerd":
        channel = Channel(runtime_endpoint(docker_host()))

        async def cri_kill(cid: str) -> None:
            await channel.runtime.StopContainer(pb.StopContainerRequest(container_id=cid, timeout=0))

        async def cri_running(cid: str) -> bool:
            status = await channel.runtime.ContainerStatus(pb.ContainerStatusRequest(container_id=cid))
            return bool(status.status.state == pb.CONTAINER_RUNNING)

        return cri_kill, cri_running, channel.close
    docker = aiodocker.Docker(url=docker_host())

    async def docker_kill(cid: str) -> None:
        await docker.containers.container(cid).kill(signal="SIGKILL")

    async def docker_running(cid: str) -> bool:
        inspect = await docker.containers.container(cid).show()
        return bool(inspect["State"]["Running"])

    return docker_kill, docker_running, docker.close


async def _terminated_at(agent: AgentProcess, name: str) -> float:
    while True:
        p = await agent.pod(name)
        if p is not None and "terminated" in cstatus(p, "main")["state"]:
            return time.monotonic()
        await asyncio.sleep(0.005)


async def main(events: int) -> None:
    kill, running, close = await _killer()
    watch = ExitWatch(running)
    lat: list[float] = []
    rt: list[float] = []
    readable: list[float] = []
    try:
        async with running_agent() as agent, exit_events(watch):
            for i in range(events):
                agent.put(f"k{i}.yaml", sleeper_pod(f"k{i}", restartPolicy="Never"))
            pods: dict[int, dict[str, Any]] = {}
            for i in range(events):
                pods[i] = await agent.wait_pod(f"k{i}", lambda p: p["status"].get("phase") == "Running", "Running", 300)
            await asyncio.sleep(2)
            for i in range(events):
                cid = container_id(pods[i], "main")
                t0 = time.monotonic()
                shown, _ = await asyncio.gather(_terminated_at(agent, f"k{i}"), kill(cid))
                arrived = await watch.wait(cid, 30)
                lat.append(shown - t0)
                rt.append(arrived - t0)
                if (read := await watch.wait_readable(cid, 30)) is not None:
                    readable.append(read - t0)
            for i in range(events):
                (agent.manifests / f"k{i}.yaml").unlink()
            await asyncio.sleep(3)
    finally:
        await close()
    s, r, st = summary(lat), summary(rt), summary(readable)
    ratio = s["p99"] / r["p99"] if r["p99"] > 0 else float("nan")
    ratio_state = s["p99"] / st["p99"] if st["n"] and st["p99"] > 0 else float("nan")
    print(table(["events", "who", "p50 s", "p90 s", "p99 s", "max s"],
                [[s["n"], "agent /pods", s["p50"], s["p90"], s["p99"], s["max"]],
                 [r["n"], f"{agent_runtime()} event", r["p50"], r["p90"], r["p99"], r["max"]],
                 [st["n"], f"{agent_runtime()} state read", st["p50"], st["p90"], st["p99"], st["max"]]]))
    print(f"ratio p99 (agent / runtime event): {ratio:.2f}; (agent / runtime state read): {ratio_state:.2f}")
    print("results:", write_result("status-latency", {"runtime": agent_runtime(), "latency": s, "samples": lat,
                                                      "runtime_event": r, "runtime_samples": rt,
                                                      "runtime_state_read": st, "runtime_state_samples": readable,
                                                      "ratio_p99": ratio, "ratio_p99_state_read": ratio_state}))
