"""Soak: waves of static pods that run, crash and exit, then are deleted, for a fixed time against the real agent.

Each wave writes `per_kind` pods of three kinds — a sleeper (restartPolicy Always, an emptyDir, Running),
a crasher (exit 1 under restartPolicy Always: restarted once, then in CrashLoopBackOff) and a one-shot
(restartPolicy Never, Succeeded) — waits until every one reached that state, removes the manifests and waits
until the agent reports none. After the last wave it counts what the run left: containers of this node's
pods, pod cgroups under the agent's cgroup root, mounts under its root dir, pod dirs, pod log dirs, legacy
log links, and the agent's open file descriptors and threads. Shared by `bench/run soak` (one hour) and the
suite's 5-minute version, run through an API server outage (tests/integration/test_agent_soak_outage.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiodocker

from tests.integration.agent_env import BUSYBOX, AgentProcess, agent_runtime, cstatus
from tests.integration.runtime_view import open_view

CGROUP_MOUNTS = Path("/sys/fs/cgroup")
KINDS = ("sleep", "crash", "once")


def soak_pod(name: str, kind: str) -> dict[str, Any]:
    spec: dict[str, Any]
    main: dict[str, Any] = {"name": "main", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent"}
    if kind == "sleep":
        main |= {"command": ["sh", "-c", "echo up > /scratch/f; exec sleep 3600"],
                 "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}
        spec = {"restartPolicy": "Always", "volumes": [{"name": "scratch", "emptyDir": {}}]}
    elif kind == "crash":
        main |= {"command": ["sh", "-c", "echo crashing; exit 1"],
                 "resources": {"limits": {"cpu": "20m", "memory": "16Mi"}}}
        spec = {"restartPolicy": "Always"}
    else:
        main |= {"command": ["sh", "-c", "echo done"]}
        spec = {"restartPolicy": "Never"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [main], **spec}}


def reached(kind: str, pod: dict[str, Any]) -> bool:
    """The state a pod of this kind is waited for before it is deleted."""
    status = pod.get("status", {})
    try:
        c = cstatus(pod, "main")
    except KeyError:
        return False
    if kind == "sleep":
        return status.get("phase") == "Running" and bool(c.get("ready"))
    if kind == "crash":
        return int(c.get("restartCount", 0)) >= 1
    return bool(status.get("phase") == "Succeeded")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def pod_cgroups_left(cgroup_root: str, keep: Collection[str] = ()) -> int:
    """Pod cgroups under the agent's own cgroup root, in every hierarchy (cgroup2 `unified` included), but those
    of the pods whose UIDs are in `keep`."""
    kept = {f"pod{uid}" for uid in keep}
    left = 0
    for mount in (p for p in CGROUP_MOUNTS.iterdir() if p.is_dir()):
        kubepods = mount / cgroup_root.strip("/") / "kubepods"
        for parent in (kubepods, kubepods / "burstable", kubepods / "besteffort"):
            if parent.is_dir():
                left += sum(1 for c in parent.iterdir()
                            if c.is_dir() and c.name.startswith("pod") and c.name not in kept)
    return left


def mounts_under(root: Path, keep: Collection[str] = ()) -> int:
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mounts", encoding="utf-8") as fh:
        return sum(1 for line in fh
                   if (m := line.split()[1]).startswith(prefix) and not any(uid in m for uid in keep))


def entries(d: Path, keep: Callable[[str], bool] = lambda _: False) -> int:
    return sum(1 for e in d.iterdir() if not keep(e.name)) if d.is_dir() else 0


async def node_containers(docker: aiodocker.Docker, node: str) -> int:
    """Containers (sandboxes included) of this node's static pods, running or not, in the agent's runtime."""
    if agent_runtime() != "docker":
        view = await open_view()
        try:
            return len(await view.objects_of_node(node))
        finally:
            await view.runtime.close()
    found = await docker.containers.list(all=True, filters=json.dumps({"label": ["io.kubernetes.pod.uid"]}))
    return sum(1 for c in found
               if c._container.get("Labels", {}).get("io.kubernetes.pod.name", "").endswith(f"-{node}"))


@dataclass
class Leftovers:
    containers: int
    pod_cgroups: int
    mounts: int
    pod_dirs: int
    pod_log_dirs: int
    legacy_log_links: int

    def total(self) -> int:
        return (self.containers + self.pod_cgroups + self.mounts + self.pod_dirs + self.pod_log_dirs
                + self.legacy_log_links)


async def leftovers(agent: AgentProcess, docker: aiodocker.Docker, keep: dict[str, str] | None = None) -> Leftovers:
    """What the soak's pods left; `keep`: name → UID of pods that are not the soak's (API pods running through
    it), whose containers, cgroups, mounts, dirs and logs are not counted."""
    keep = keep or {}
    uids = list(keep.values())

    def kept(entry: str) -> bool:
        return any(uid in entry for uid in uids) or any(entry.startswith(f"{name}_") for name in keep)

    return Leftovers(containers=await node_containers(docker, agent.node),
                     pod_cgroups=pod_cgroups_left(agent.cgroup_root, uids), mounts=mounts_under(agent.root, uids),
                     pod_dirs=entries(agent.root / "pods", kept), pod_log_dirs=entries(agent.logs, kept),
                     legacy_log_links=entries(agent.legacy_logs, kept))


@dataclass
class WaveRow:
    wave: int
    seconds: float  # since the soak started
    pods: int  # created so far
    rss: int
    fds: int
    threads: int


@dataclass
class SoakResult:
    waves: list[WaveRow] = field(default_factory=list)
    idle_rss: int = 0
    warm_rss: int = 0  # at the end of the warm-up (a fraction of the run, at least one wave)
    warm_fds: int = 0
    warm_pods: int = 0  # pods created by the end of the warm-up
    end_rss: int = 0
    max_rss: int = 0
    left: Leftovers | None = None
    seconds: float = 0.0

    def growth_pct(self) -> float:
        return 100 * (self.end_rss - self.warm_rss) / self.warm_rss if self.warm_rss else float("nan")

    def growth_per_pod(self) -> float:
        """Bytes of RSS growth per pod created after the warm-up."""
        pods = (self.waves[-1].pods if self.waves else 0) - self.warm_pods
        return (self.end_rss - self.warm_rss) / pods if pods > 0 else float("nan")

    def as_json(self) -> dict[str, Any]:
        return {"idle_rss": self.idle_rss, "warm_rss": self.warm_rss, "end_rss": self.end_rss,
                "max_rss": self.max_rss, "growth_pct": self.growth_pct(), "seconds": self.seconds,
                "left": vars(self.left) if self.left else None,
                "waves": [vars(w) for w in self.waves]}


async def soak(agent: AgentProcess, docker: aiodocker.Docker, seconds: float, per_kind: int = 2,
               on_wave: Callable[[WaveRow], None] | None = None, warmup: float = 0.1,
               keep: dict[str, str] | None = None) -> SoakResult:
    """Churn for `seconds` (whole waves: the last one starts before the time is up), then count leftovers.
    RSS growth is measured from the end of the warm-up (`warmup` × the run): the event store (1 000 events) and
    the allocator's pools fill during the first minutes. `keep`: name → UID of other pods the agent runs
    meanwhile (API pods), left out of the counts."""
    assert agent.proc is not None
    pid = agent.proc.pid
    res = SoakResult(idle_rss=rss_bytes(pid))
    t0 = time.monotonic()
    warm_until = t0 + seconds * warmup
    created = 0
    wave = 0
    while wave == 0 or time.monotonic() - t0 < seconds:
        names = {f"s{wave}-{k}-{i}": k for k in KINDS for i in range(per_kind)}
        for n, k in names.items():
            agent.put(f"{n}.yaml", soak_pod(n, k))
        created += len(names)

        async def all_reached(names: dict[str, str] = names) -> bool:
            by_name = {p["metadata"]["name"]: p for p in await agent.pods()}
            return all(reached(k, by_name.get(f"{n}-{agent.node}", {})) for n, k in names.items())

        await agent.wait_for(f"wave {wave}: every pod running, crashed once or done", all_reached, 120, 0.5)
        for n in names:
            (agent.manifests / f"{n}.yaml").unlink()

        async def none_left() -> bool:
            return not [p for p in await agent.pods() if str(p["metadata"]["name"]).endswith(f"-{agent.node}")]

        await agent.wait_for(f"wave {wave}: every pod removed", none_left, 120, 0.5)
        row = WaveRow(wave + 1, time.monotonic() - t0, created, rss_bytes(pid), open_fds(pid), threads(pid))
        res.waves.append(row)
        res.max_rss = max(res.max_rss, row.rss)
        if wave == 0 or time.monotonic() <= warm_until:
            res.warm_rss, res.warm_fds, res.warm_pods = row.rss, row.fds, row.pods
        if on_wave is not None:
            on_wave(row)
        wave += 1
    res.seconds = time.monotonic() - t0

    # what a removed pod leaves is cleaned up asynchronously (container GC, runc's cgroup removal)
    deadline = time.monotonic() + 60
    while True:
        res.left = await leftovers(agent, docker, keep)
        if res.left.total() == 0 or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    res.end_rss = rss_bytes(pid)
    return res
