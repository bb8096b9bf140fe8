"""Issue 4 end to end: probes run by the real agent against real containers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.runtime_view import RuntimeView

pytestmark = pytest.mark.integration
agent = agent_env.agent
runtime_view = views.runtime_view

GRPC_IMAGE = "minikubelet.test/grpc-health:1"


def cond(p: dict[str, Any], t: str) -> str:
    return str(next(c for c in p["status"]["conditions"] if c["type"] == t)["status"])


async def run_in(view: RuntimeView, cid: str, cmd: list[str]) -> None:
    result = await view.exec(cid, *cmd)
    assert result.exit_code == 0, result


async def test_liveness_failure_restarts_container(agent: AgentProcess) -> None:
    agent.put("live.yaml", simple_pod("live", [{
        "name": "app", "command": ["sh", "-c", "touch /tmp/healthy; sleep 2; rm /tmp/healthy; sleep 3600"],
        "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1, "failureThreshold": 2,
                          "terminationGracePeriodSeconds": 1}}]))
    agent.start()
    p = await agent.wait_pod("live", lambda p: cstatus(p, "app")["restartCount"] >= 1, "restarted by liveness", 40)
    cs = cstatus(p, "app")
    assert cs["lastState"]["terminated"]["exitCode"] == 137  # sh ignores SIGTERM; probe grace is 1 s
    evs = (await agent.get_json(f"/debug/events?uid={p['metadata']['uid']}"))["items"]
    unhealthy = [e for e in evs if e["reason"] == "Unhealthy"]
    assert unhealthy and unhealthy[0]["message"].startswith("Liveness probe failed: ")
    assert any(e["reason"] == "Killing" and e["message"] == "Container app failed liveness probe, will be restarted"
               for e in evs)
    _, metrics = await agent.get_text("/metrics/probes")
    assert 'prober_probe_total{' in metrics and 'probe_type="Liveness"' in metrics and 'result="failed"' in metrics


async def test_startup_probe_protects_slow_starter(agent: AgentProcess) -> None:
    agent.put("slow.yaml", simple_pod("slow", [{
        "name": "app", "command": ["sh", "-c", "sleep 4; touch /tmp/started; sleep 3600"],
        "startupProbe": {"exec": {"command": ["test", "-f", "/tmp/started"]}, "periodSeconds": 1,
                         "failureThreshold": 15},
        "livenessProbe": {"exec": {"command": ["test", "-f", "/tmp/started"]}, "periodSeconds": 1,
                          "failureThreshold": 1}}]))
    agent.start()
    p = await agent.wait_pod("slow", lambda p: p["status"].get("phase") == "Running", "Running")
    assert not cstatus(p, "app")["started"]
    p = await agent.wait_pod("slow", lambda p: cstatus(p, "app")["started"] and cstatus(p, "app")["ready"],
                             "started", 30)
    assert cstatus(p, "app")["restartCount"] == 0


async def test_readiness_flips_ready_both_ways(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    agent.put("ready.yaml", simple_pod("ready", [{
        "name": "web", "command": ["sh", "-c", "mkdir -p /www; echo ok > /www/healthz; exec httpd -f -p 8080 -h /www"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1,
                           "failureThreshold": 1}}]))
    agent.start()
    p = await agent.wait_pod("ready", lambda p: cond(p, "Ready") == "True", "Ready", 30)
    cid = container_id(p, "web")
    await run_in(runtime_view, cid, ["rm", "/www/healthz"])
    p = await agent.wait_pod("ready", lambda p: cond(p, "Ready") == "False", "not Ready", 15)
    assert cond(p, "ContainersReady") == "False" and not cstatus(p, "web")["ready"]
    await run_in(runtime_view, cid, ["sh", "-c", "echo ok > /www/healthz"])
    p = await agent.wait_pod("ready", lambda p: cond(p, "Ready") == "True", "Ready again", 15)
    assert cstatus(p, "web")["restartCount"] == 0 and container_id(p, "web") == cid


async def test_hanging_exec_probe_does_not_stall_others(agent: AgentProcess) -> None:
    agent.put("hang.yaml", simple_pod("hang", [
        {"name": "hung", "command": ["sleep", "3600"],
         "readinessProbe": {"exec": {"command": ["sleep", "30"]}, "periodSeconds": 2, "timeoutSeconds": 1}},
        {"name": "tcp", "command": ["httpd", "-f", "-p", "9000"],
         "readinessProbe": {"tcpSocket": {"port": 9000}, "periodSeconds": 1}},
    ]))
    agent.put("closed.yaml", simple_pod("closed", [
        {"name": "tcp", "command": ["sleep", "3600"],
         "readinessProbe": {"tcpSocket": {"port": 9000}, "periodSeconds": 1}}]))
    agent.start()
    t0 = time.monotonic()
    p = await agent.wait_pod("hang", lambda p: cstatus(p, "tcp")["ready"], "tcp ready", 20)
    assert time.monotonic() - t0 < 15
    assert not cstatus(p, "hung")["ready"] and cond(p, "Ready") == "False"
    await agent.wait_up(5)
    closed = await agent.pod("closed")
    assert closed is not None and not cstatus(closed, "tcp")["ready"]


async def test_grpc_probe(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    agent.put("grpc.yaml", simple_pod("grpc", [{
        "name": "srv", "image": GRPC_IMAGE, "env": [{"name": "PORT", "value": "7777"}],
        "readinessProbe": {"grpc": {"port": 7777}, "periodSeconds": 1, "failureThreshold": 1}}],
        terminationGracePeriodSeconds=1))
    agent.start()
    p = await agent.wait_pod("grpc", lambda p: p["status"].get("phase") == "Running", "Running", 30)
    assert not cstatus(p, "srv")["ready"]  # NOT_SERVING until /tmp/healthy exists
    await run_in(runtime_view, container_id(p, "srv"), ["/usr/bin/python3", "-c", "open('/tmp/healthy', 'w')"])
    await agent.wait_pod("grpc", lambda p: cstatus(p, "srv")["ready"], "SERVING -> ready", 15)


async def test_sidecar_startup_probe_gates_next_init(agent: AgentProcess) -> None:
    agent.put("gate.yaml", simple_pod(
        "gate", [{"name": "app", "command": ["sleep", "3600"]}],
        initContainers=[
            {"name": "side", "image": agent_env.BUSYBOX, "imagePullPolicy": "IfNotPresent", "restartPolicy": "Always",
             "command": ["sh", "-c", "sleep 3; touch /tmp/up; sleep 3600"],
             "startupProbe": {"exec": {"command": ["test", "-f", "/tmp/up"]}, "periodSeconds": 1,
                              "failureThreshold": 30}},
            {"name": "after", "image": agent_env.BUSYBOX, "imagePullPolicy": "IfNotPresent", "command": ["true"]},
        ], terminationGracePeriodSeconds=1))
    agent.start()
    p = await agent.wait_pod("gate", lambda p: "running" in cstatus(p, "side")["state"], "sidecar running", 20)
    assert not cstatus(p, "side")["started"]
    assert cstatus(p, "after")["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert p["status"]["phase"] == "Pending"
    p = await agent.wait_pod("gate", lambda p: p["status"].get("phase") == "Running"
                             and cstatus(p, "app")["ready"], "Running", 30)
    side_started = cstatus(p, "side")["state"]["running"]["startedAt"]
    after_started = cstatus(p, "after")["state"]["terminated"]["startedAt"]
    assert after_started >= side_started
    assert cstatus(p, "side")["started"] and cstatus(p, "side")["restartCount"] == 0
