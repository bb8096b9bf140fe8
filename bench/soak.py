"""soak: an hour (by default) of pod churn — pods that run, crash and exit, then are deleted — against the real
agent; its RSS, open fds and threads per wave, and what the run left behind (tests/integration/soak.py).

Issue 17's bound: agent RSS growth < 5 % (from the end of the warm-up, the first tenth of the run, to the end),
and no container, pod cgroup, mount, pod dir or log file left.
"""

from __future__ import annotations

import aiodocker

from bench.common import running_agent, table, write_result
from tests.integration.soak import WaveRow, soak


async def main(minutes: float, per_kind: int) -> None:
    def progress(w: WaveRow) -> None:
        print(f"wave {w.wave} at {w.seconds:.0f} s: {w.pods} pods, RSS {w.rss / 2**20:.1f} MiB, "
              f"{w.fds} fds, {w.threads} threads", flush=True)

    async with running_agent() as agent:
        docker = aiodocker.Docker(url=agent.docker_host)
        try:
            res = await soak(agent, docker, minutes * 60, per_kind, progress)
        finally:
            await docker.close()
    step = max(1, len(res.waves) // 12)
    rows = [[w.wave, round(w.seconds), w.pods, w.rss / 2**20, w.fds, w.threads] for w in res.waves[::step]]
    print(table(["wave", "s", "pods", "agent RSS MiB", "fds", "threads"], rows))
    assert res.left is not None
    print(f"idle {res.idle_rss / 2**20:.1f} MiB; warm {res.warm_rss / 2**20:.1f} MiB; end {res.end_rss / 2**20:.1f} MiB "
          f"({res.growth_pct():+.2f} %); max {res.max_rss / 2**20:.1f} MiB; {res.waves[-1].pods} pods in "
          f"{len(res.waves)} waves, {res.seconds:.0f} s; left: {vars(res.left)}")
    path = write_result("soak", {"minutes": minutes, "per_kind": per_kind, **res.as_json()})
    print(f"results: {path}")
