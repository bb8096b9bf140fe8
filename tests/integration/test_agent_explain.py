"""`minikubelet explain` on a standalone node (the real agent on the real Docker Engine): the command asks the
agent's read-only port (found in the agent's config file) and prints the document, which names the cause the test
created (a crash loop, an image that never pulls) and reads the resources back from the runtime and the kernel."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, simple_pod

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "explain.schema.json").read_text())
NEVER_PULLS = "127.0.0.1:1/mkl/never:1"  # nothing listens on port 1: the pull fails at once


def explain_cli(a: AgentProcess, pod: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikubelet", "explain", f"default/{pod}-{a.node}",
                           "--config", str(a.config), *args], capture_output=True, text=True, timeout=30)


async def explained(a: AgentProcess, pod: str) -> dict[str, Any]:
    done = await asyncio.to_thread(explain_cli, a, pod)
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(doc, SCHEMA)
    return doc


def container(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in (doc["decision"] or {}).get("containers", []) if c["name"] == name)


async def test_explain_names_the_cause_on_a_standalone_node(agent: AgentProcess) -> None:
    a = agent
    a.start()
    await a.wait_up()
    a.put("crash.yaml", simple_pod("crash", [{"name": "main", "command": ["sh", "-c", "exit 3"]}]))
    a.put("nopull.yaml", simple_pod("nopull", [{"name": "main", "image": NEVER_PULLS, "imagePullPolicy": "Always"}]))
    a.put("fine.yaml", simple_pod("fine", [{"name": "main", "command": ["sleep", "3600"],
                                            "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}}]))

    async def crash_looping() -> dict[str, Any] | None:
        doc = await explained(a, "crash")
        return doc if doc["decision"] and container(doc, "main")["reason"] == "CrashLoopBackOff" else None

    doc = await a.wait_for("crash to be in CrashLoopBackOff", crash_looping, timeout=90)
    main = container(doc, "main")
    assert main["action"] == "wait" and main["exitCodes"][0] == 3 and main["restartCount"] >= 1
    assert 0 <= main["backoffRemainingSeconds"] <= main["backoffSeconds"]
    assert doc["lifecycle"]["stage"] == "syncing" and doc["admission"]["admitted"] is True

    async def pull_failing() -> dict[str, Any] | None:
        doc = await explained(a, "nopull")
        ok = doc["decision"] and container(doc, "main")["reason"] in ("ErrImagePull", "ImagePullBackOff")
        return doc if ok and "lastPullError" in container(doc, "main") else None

    doc = await a.wait_for("nopull to fail its pull", pull_failing, timeout=90)
    assert container(doc, "main")["image"] == NEVER_PULLS

    async def running() -> dict[str, Any] | None:
        # the sync that started it records `start`; `keep` (Running) waits for the next sync, which the
        # container's own start does not bring forward (the worker saw it): the phase says it runs
        doc = await explained(a, "fine")
        started = doc["decision"] and container(doc, "main")["action"] in ("start", "keep")
        return doc if started and doc["status"].get("phase") == "Running" else None

    doc = await a.wait_for("fine to run", running, timeout=90)
    [res] = doc["resources"]["containers"]
    assert res["limits"] == {"cpu": "250m", "memory": "64Mi"}
    assert res["runtime"]["memoryLimitBytes"] == 64 << 20 and res["runtime"]["cpuQuota"] == 25000
    assert res["differences"] == [], res
    # the container's own cgroup files, read back from the kernel beside the pod cgroup
    assert res["kernel"]["actual"]["memoryLimit"] == 64 << 20 and res["kernel"]["actual"]["cpuQuota"] == 25000
    assert res["kernel"]["differences"] == [], res["kernel"]
    pod_cgroup = doc["resources"]["podCgroup"]
    assert pod_cgroup["kernel"]["memoryLimit"] == 64 << 20 and pod_cgroup["differences"] == [], pod_cgroup

    wide = await asyncio.to_thread(explain_cli, a, "crash", "-o", "wide")
    assert wide.returncode == 0 and "CrashLoopBackOff" in wide.stdout and "Stage:      syncing" in wide.stdout
    unknown = await asyncio.to_thread(explain_cli, a, "nobody")
    assert unknown.returncode == 1 and "not known on this node" in unknown.stderr
