"""Shared pieces: the agent under measurement, process readings, percentiles, result files."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiodocker

from tests.integration.agent_env import BUSYBOX, AgentProcess, stop_and_clean

RESULTS = Path(__file__).resolve().parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def docker_host() -> str:
    host = os.environ.get("MKL_TEST_DOCKER_HOST", "")
    if not host:
        raise SystemExit("bench: MKL_TEST_DOCKER_HOST is not set; run through bench/run")
    return host


def parse_counts(text: str) -> list[int]:
    """`--pods 1,10,30`: non-negative pod counts, in the order given."""
    counts = []
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()):
            raise ValueError(f"pod counts must be comma-separated non-negative integers, got {text!r}")
        counts.append(int(part))
    return counts


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


@dataclass
class ProcReading:
    cpu_seconds: float
    rss_bytes: int


def read_proc(pid: int) -> ProcReading:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    rss = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return ProcReading(cpu, rss)


def engine_pids() -> dict[str, int]:
    netns = os.environ.get("MKL_TEST_NETNS", "mkltest")
    out = {}
    for name in ("dockerd", "containerd"):
        try:
            out[name] = int(Path(f"/run/{netns}/{name}.pid").read_text().strip())
        except (OSError, ValueError):
            pass
    return out


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"bench": name, "machine": machine(), **data}, indent=2))
    return path


def table(headers: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    cells = [headers] + [[fmt(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def sleeper_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sleep", "3600"]}], "terminationGracePeriodSeconds": 1, **spec}}


@contextlib.asynccontextmanager
async def running_agent(extra: dict[str, Any] | None = None) -> AsyncIterator[AgentProcess]:
    """The real agent process on a fresh static pod dir and root dir, healthy, stopped afterwards; `extra` adds
    configuration fields."""
    with tempfile.TemporaryDirectory(prefix="mkl-bench-") as tmp:
        agent = AgentProcess(Path(tmp), docker_host())
        agent.extra = {"fileCheckFrequency": "20s", **(extra or {})}
        agent.start()
        docker = aiodocker.Docker(url=agent.docker_host)
        try:
            await agent.wait_up()
            yield agent
        finally:
            await stop_and_clean(agent, docker)
            await docker.close()


def free_port_in_netns() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
