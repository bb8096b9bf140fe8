"""churn: waves of pods created, Running, then removed; the agent's RSS after each wave, and what is left.

Issue 11's bound: after an 800-pod churn no pod cgroup is left on any hierarchy (the cgroup2 `unified` mount of
a v1 host included), no pod directory under the root dir, and the agent's RSS grew less than 5 % over the
run (measured from the end of the first wave, when the imports and caches a first pod needs are loaded).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench.common import read_proc, running_agent, table, write_result
from tests.integration.agent_env import BUSYBOX

CGROUP_MOUNTS = Path("/sys/fs/cgroup")
RESOURCES = [{}, {"requests": {"cpu": "10m", "memory": "8Mi"}},
             {"requests": {"cpu": "10m", "memory": "8Mi"}, "limits": {"cpu": "10m", "memory": "8Mi"}}]


def churn_pod(name: str, i: int) -> dict[str, Any]:
    """One of each QoS class, with an emptyDir, exiting at once (restartPolicy Never)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "m", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sh", "-c", "echo ok > /scratch/f"],
                                     "resources": RESOURCES[i % 3],
                                     "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                     "volumes": [{"name": "scratch", "emptyDir": {}}]}}


def pod_cgroups_left(cgroup_root: str) -> int:
    left = 0
    for mount in (p for p in CGROUP_MOUNTS.iterdir() if p.is_dir()):
        kubepods = mount / cgroup_root.strip("/") / "kubepods"
        for parent in (kubepods, kubepods / "burstable", kubepods / "besteffort"):
            if parent.is_dir():
                left += sum(1 for c in parent.iterdir() if c.is_dir() and c.name.startswith("pod"))
    return left


async def main(total: int, per_wave: int) -> None:
    async with running_agent() as agent:
        assert agent.proc is not None
        pid = agent.proc.pid
        idle = read_proc(pid).rss_bytes
        rows: list[list[Any]] = []
        base = 0
        t0 = time.monotonic()
        for wave in range(max(1, total // per_wave)):
            names = [f"c{wave}-{i}" for i in range(per_wave)]
            for i, n in enumerate(names):
                agent.put(f"{n}.yaml", churn_pod(n, i))

            async def all_done(names: list[str] = names) -> bool:
                by_name = {p["metadata"]["name"]: p for p in await agent.pods()}
                return all(by_name.get(f"{n}-{agent.node}", {}).get("status", {}).get("phase") == "Succeeded"
                           for n in names)

            await agent.wait_for(f"wave {wave} succeeded", all_done, 300)
            for n in names:
                (agent.manifests / f"{n}.yaml").unlink()

            async def all_gone() -> bool:
                return not await agent.pods()

            await agent.wait_for(f"wave {wave} removed", all_gone, 300)
            rss = read_proc(pid).rss_bytes
            if wave == 0:
                base = rss
            rows.append([wave + 1, (wave + 1) * per_wave, rss / 2**20, 100 * (rss - base) / base if base else 0.0])
        await asyncio.sleep(3)
        end = read_proc(pid).rss_bytes
        pods_dir = agent.root / "pods"
        dirs_left = sum(1 for _ in pods_dir.iterdir()) if pods_dir.is_dir() else 0
        cgroups_left = pod_cgroups_left(agent.cgroup_root)
        took = time.monotonic() - t0
    print(table(["wave", "pods", "agent RSS MiB", "growth %"], rows))
    growth = 100 * (end - base) / base
    print(f"idle {idle / 2**20:.1f} MiB; after wave 1 {base / 2**20:.1f} MiB; end {end / 2**20:.1f} MiB "
          f"({growth:+.1f} %); pod cgroups left {cgroups_left}; pod dirs left {dirs_left}; {took:.0f} s")
    path = write_result("churn", {"total": total, "per_wave": per_wave, "idle_rss": idle, "base_rss": base,
                                  "end_rss": end, "growth_pct": growth, "cgroups_left": cgroups_left,
                                  "pod_dirs_left": dirs_left, "seconds": took, "waves": rows})
    print(f"results: {path}")
