"""Admission end to end: the real agent process, static pod manifests, the real Docker Engine.

Static pods are critical pods upstream: one refused only for lack of resources goes through the kubelet's
preemption, which finds no pod it may preempt (the others are static too) and refuses it with
UnexpectedAdmissionError; every other refusal keeps the predicate's reason.
"""

from __future__ import annotations

import json
import os
import random
from datetime import datetime
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, simple_pod

agent = agent_env.agent
docker = agent_env.docker

pytestmark = pytest.mark.integration

SLEEP = {"name": "main", "command": ["sleep", "3600"]}


def sleeper(name: str, **spec: Any) -> dict[str, Any]:
    return simple_pod(name, [dict(SLEEP)], terminationGracePeriodSeconds=1, **spec)


def with_host_port(name: str, port: int) -> dict[str, Any]:
    c = {**SLEEP, "ports": [{"containerPort": 80, "hostPort": port}]}
    return simple_pod(name, [c], terminationGracePeriodSeconds=1)


async def pod_containers(d: aiodocker.Docker, full_name: str) -> list[Any]:
    """Every container (the sandbox included) the runtime has for a pod."""
    return list(await d.containers.list(all=True, filters=json.dumps({"label": [f"io.kubernetes.pod.name={full_name}"]})))


def rejected(p: dict[str, Any]) -> bool:
    return bool(p["status"].get("phase") == "Failed")


async def test_admission_refuses_with_the_kubelets_reasons(agent: AgentProcess, docker: aiodocker.Docker) -> None:
    agent.extra["registerWithTaints"] = [{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]
    port = random.randint(20000, 40000)
    too_big = sleeper("too-big")
    too_big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": str((os.cpu_count() or 1) + 1)}}
    agent.put("too-big.yaml", too_big)
    agent.put("selector.yaml", sleeper("selector", nodeSelector={"disktype": "ssd"}))
    agent.put("windows.yaml", sleeper("windows", os={"name": "windows"}))
    agent.put("fits.yaml", sleeper("fits", nodeSelector={"kubernetes.io/os": "linux"}))
    agent.put("port-a.yaml", with_host_port("port-a", port))
    agent.start()

    first = await agent.wait_phase("port-a", "Running", 30)
    await agent.wait_phase("fits", "Running", 30)  # static pods are exempt from the NoExecute taint
    agent.put("port-b.yaml", with_host_port("port-b", port))

    expected = {
        "too-big": "UnexpectedAdmissionError",
        "selector": "NodeAffinity",
        "windows": "PodOSNotSupported",
        "port-b": "NodePorts",
    }
    for name, reason in expected.items():
        p = await agent.wait_pod(name, rejected, "Failed", 30)
        st = p["status"]
        assert st["reason"] == reason, (name, st)
        assert st["message"].startswith("Pod was rejected: "), st
        assert st["qosClass"] in ("BestEffort", "Burstable")
        assert await pod_containers(docker, f"{name}-{agent.node}") == [], f"{name} ran a container"
    messages = {n: (await agent.pod(n) or {})["status"]["message"] for n in expected}
    assert "no set of running pods found to reclaim resources: [(res: cpu, q: " in messages["too-big"]
    assert messages["selector"] == ("Pod was rejected: Predicate NodeAffinity failed: "
                                    "node(s) didn't match Pod's node affinity/selector")
    assert messages["port-b"] == ("Pod was rejected: Predicate NodePorts failed: "
                                  "node(s) didn't have free ports for the requested pod ports")
    assert messages["windows"] == "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS"

    # the first pod on the port keeps running, in the same containers
    still = await agent.pod("port-a")
    assert still is not None and still["status"]["phase"] == "Running"
    assert still["status"]["containerStatuses"][0]["containerID"] == \
        first["status"]["containerStatuses"][0]["containerID"]


class LabelledAgent(AgentProcess):
    """An agent started with --node-labels (a flag only, as upstream)."""

    def __init__(self, base: Path, docker_host: str) -> None:
        super().__init__(base, docker_host)
        self.args = ["--node-labels", "disktype=ssd,node.kubernetes.io/pool=edge"]


async def test_node_labels_reach_admission(tmp_path: Path, docker: aiodocker.Docker) -> None:
    a = LabelledAgent(tmp_path, agent_env.docker_host())
    try:
        a.put("labelled.yaml", sleeper("labelled", nodeSelector={"disktype": "ssd", "node.kubernetes.io/pool": "edge",
                                                                 "kubernetes.io/hostname": a.node}))
        a.start()
        await a.wait_phase("labelled", "Running", 30)
    finally:
        await agent_env.stop_and_clean(a, docker)


async def test_a_critical_pod_starts_only_once_the_pod_it_preempts_has_stopped(
        agent: AgentProcess, docker: aiodocker.Docker) -> None:
    """upstream killPodNow: the preempting pod is admitted once its victim's containers are dead. The victim
    ignores SIGTERM, so it stops only when its 3 s grace runs out; the critical pod's container starts after."""
    cpus = os.cpu_count() or 1
    stubborn = {"name": "main", "command": ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"],
                "resources": {"requests": {"cpu": f"{cpus * 1000 - 500}m"}}}
    agent.put("low.yaml", simple_pod("low", [stubborn], terminationGracePeriodSeconds=3, priority=10))
    agent.start()
    await agent.wait_phase("low", "Running", 30)
    high = {**SLEEP, "resources": {"requests": {"cpu": "1"}}}
    agent.put("high.yaml", simple_pod("high", [high], terminationGracePeriodSeconds=1, priority=20))

    low = await agent.wait_pod("low", rejected, "Failed", 30)
    assert low["status"]["reason"] == "Preempting", low["status"]
    assert low["status"]["message"] == "Preempted in order to admit critical pod"
    await agent.wait_phase("high", "Running", 30)
    [victim] = [c for c in await pod_containers(docker, f"low-{agent.node}")
                if c["Labels"].get("io.kubernetes.container.name") == "main"]
    [preemptor] = [c for c in await pod_containers(docker, f"high-{agent.node}")
                   if c["Labels"].get("io.kubernetes.container.name") == "main"]
    victim_state = (await victim.show())["State"]
    preemptor_state = (await preemptor.show())["State"]
    assert not victim_state["Running"] and victim_state["ExitCode"] == 137, victim_state  # SIGKILLed at the grace's end
    assert _instant(preemptor_state["StartedAt"]) >= _instant(victim_state["FinishedAt"]), (victim_state, preemptor_state)


def _instant(docker_time: str) -> datetime:
    """Docker's RFC 3339 with up to nine fraction digits, trailing zeros trimmed."""
    whole, _, frac = docker_time.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(frac + '000000')[:6]}+00:00")
