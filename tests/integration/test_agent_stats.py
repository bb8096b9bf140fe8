"""Issue 15 item 5 end to end: /stats/summary, /metrics/resource and /metrics/cadvisor of the real agent, from the
real kernel's cgroups (v1 here), the pods' network namespaces and the log files, with the real Docker Engine."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures import KUBERNETES
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, container_id, cstatus, free_port, simple_pod
from tests.integration.test_agent_kubelet_api import anonymous_ctx, write_pki

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker

MiB = 2**20
KUBELET_API = KUBERNETES / "kubelet-api"


def _pod(summary: dict[str, Any], agent: AgentProcess, name: str) -> dict[str, Any]:
    full = f"{name}-{agent.node}"
    return next(p for p in summary["pods"] if p["podRef"]["name"] == full)


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["containers"] if c["name"] == name)


async def _summary(agent: AgentProcess, query: str = "") -> dict[str, Any]:
    body: dict[str, Any] = await agent.get_json("/stats/summary" + query)
    return body


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


async def test_summary_and_metrics_follow_real_usage(agent: AgentProcess) -> None:
    grace = {"terminationGracePeriodSeconds": 1}
    agent.put("burn.yaml", simple_pod("burn", [{"name": "burn", "command": ["sh", "-c", "while :; do :; done"],
                                                "resources": {"limits": {"cpu": "200m", "memory": "32Mi"}}}], **grace))
    agent.put("mem.yaml", simple_pod("mem", [{"name": "mem", "command": [
        "sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=40 2>/dev/null; exec sleep 3600"]}], **grace))
    agent.put("talk.yaml", simple_pod("talk", [{"name": "web", "command": [
        "sh", "-c", "head -c 100000 /dev/zero > /www/big && exec httpd -f -p 8080 -h /www"]},
                                               {"name": "logger", "command": [
                                                   "sh", "-c", "while :; do echo stats-log-line-$(date +%s%N); "
                                                   "sleep 0.05; done"]}], **grace))
    agent.start()
    pods = {n: await agent.wait_phase(n, "Running") for n in ("burn", "mem", "talk")}

    async def rated() -> dict[str, Any] | None:
        s = await _summary(agent)
        try:
            c = _container(_pod(s, agent, "burn"), "burn")
        except StopIteration:
            return None
        return s if c.get("cpu", {}).get("usageNanoCores", 0) > 0 else None

    # Two housekeeping passes (10 s apart) give the first rate.
    first: dict[str, Any] = await agent.wait_for("a CPU rate for the burning container", rated, timeout=45, interval=1)
    burn = _pod(first, agent, "burn")
    burn_c = _container(burn, "burn")
    # A 200m limit: the rate is positive and cannot be far above 0.2 cores.
    assert 0 < burn_c["cpu"]["usageNanoCores"] <= 300_000_000
    assert burn["cpu"]["usageCoreNanoSeconds"] >= burn_c["cpu"]["usageCoreNanoSeconds"] > 0
    assert burn["podRef"]["uid"] == pods["burn"]["metadata"]["uid"]

    mem_c = _container(_pod(first, agent, "mem"), "mem")
    assert mem_c["memory"]["workingSetBytes"] >= 40 * MiB
    assert mem_c["memory"]["usageBytes"] >= mem_c["memory"]["workingSetBytes"]
    assert _pod(first, agent, "mem")["memory"]["workingSetBytes"] >= 40 * MiB

    talk = _pod(first, agent, "talk")
    assert talk["network"]["name"] == "eth0" and [i["name"] for i in talk["network"]["interfaces"]] == ["eth0"]
    rx0, tx0 = talk["network"]["rxBytes"], talk["network"]["txBytes"]
    logs0 = _container(talk, "logger")["logs"]["usedBytes"]
    # each container's writable layer (Docker's SizeRw) is its rootfs, on the image filesystem, and counts in the
    # pod's ephemeral storage with the logs
    # (web wrote 100 000 bytes to /www/big in its own root filesystem)
    assert _container(talk, "web")["rootfs"]["usedBytes"] >= 100000
    assert all(c["rootfs"]["capacityBytes"] > 0 for c in talk["containers"])
    assert talk["ephemeral-storage"]["usedBytes"] >= sum(
        c["rootfs"]["usedBytes"] + c["logs"]["usedBytes"] for c in talk["containers"])

    node = first["node"]
    assert node["nodeName"] == agent.node
    assert node["systemContainers"][0]["name"] == "pods"
    assert node["memory"]["workingSetBytes"] > 0 and node["cpu"]["usageCoreNanoSeconds"] > 0
    assert node["rlimit"]["maxpid"] > 0 and node["rlimit"]["curproc"] > 0
    assert node["fs"]["capacityBytes"] >= node["fs"]["availableBytes"] > 0
    assert node["runtime"]["imageFs"]["usedBytes"] > 0

    # Traffic into the pod's network namespace, from the engine's namespace (where the tests run).
    ip = pods["talk"]["status"]["podIP"]
    async with aiohttp.ClientSession() as s:
        for _ in range(10):
            async with s.get(f"http://{ip}:8080/big") as r:
                assert r.status == 200 and len(await r.read()) == 100000

    async def grown() -> dict[str, Any] | None:
        s = await _summary(agent)
        t = _pod(s, agent, "talk")
        b = _container(_pod(s, agent, "burn"), "burn")
        ok = (t["network"]["txBytes"] > tx0 + 10 * 100000 and t["network"]["rxBytes"] > rx0 and _container(t, "logger")["logs"]["usedBytes"] > logs0
              and b["cpu"]["usageCoreNanoSeconds"] > burn_c["cpu"]["usageCoreNanoSeconds"])
        return s if ok else None

    later = await agent.wait_for("counters to grow in the next pass", grown, timeout=30, interval=1)
    assert later["pods"] and later["node"]["cpu"]["time"] >= node["cpu"]["time"]

    # only_cpu_and_memory: no network, fs, volumes.
    small = await _summary(agent, "?only_cpu_and_memory=true")
    sp = _pod(small, agent, "talk")
    assert "network" not in sp and "ephemeral-storage" not in sp and "cpu" in sp and "memory" in sp
    assert "fs" not in small["node"] and "cpu" in small["node"]

    # /metrics/resource as metrics-server reads it.
    status, text = await agent.get_text("/metrics/resource")
    assert status == 200
    fams = _families(text)
    cpu = {(s.labels["namespace"], s.labels["pod"], s.labels["container"]): s.value
           for s in fams["container_cpu_usage_seconds"].samples}
    assert cpu[("default", f"burn-{agent.node}", "burn")] > 0
    ws = {s.labels["pod"]: s.value for s in fams["pod_memory_working_set_bytes"].samples}
    assert ws[f"mem-{agent.node}"] >= 40 * MiB
    assert fams["node_cpu_usage_seconds"].type == "counter" and fams["node_cpu_usage_seconds"].samples[0].value > 0
    assert fams["node_memory_working_set_bytes"].samples[0].value > 0
    assert fams["resource_scrape_error"].samples[0].value == 0

    # /metrics/cadvisor: the pod's network on its sandbox, containers by id, name and image.
    status, text = await agent.get_text("/metrics/cadvisor")
    assert status == 200
    fams = _families(text)
    tx = [s for s in fams["container_network_transmit_bytes"].samples
          if s.labels["pod"] == f"talk-{agent.node}" and s.labels["interface"] == "eth0"]
    assert len(tx) == 1 and tx[0].value > 10 * 100000 and tx[0].labels["container"] == ""
    mem_id = container_id(pods["mem"], "mem")
    wss = [s for s in fams["container_memory_working_set_bytes"].samples if s.labels["name"] == mem_id]
    assert len(wss) == 1 and wss[0].value >= 40 * MiB
    assert wss[0].labels["container"] == "mem" and wss[0].labels["namespace"] == "default"
    assert wss[0].labels["id"].startswith(agent.cgroup_root + "/kubepods/besteffort/pod")
    assert wss[0].labels["image"] == cstatus(pods["mem"], "mem")["image"]  # the runtime's name, as cAdvisor's

    # Paths 1.36 does not serve under /stats/.
    status, text = await agent.get_text("/stats/container")
    assert status == 404 and text == "404: Page Not Found"


def recorded_request_headers(scenario: str) -> dict[str, str]:
    """The headers kube-apiserver 1.36.2 sent the kubelet for this node-proxy request (Host left out)."""
    lines = (KUBELET_API / scenario / "request.txt").read_text().splitlines()[1:]
    headers = dict(line.split(": ", 1) for line in lines if ": " in line)
    headers.pop("Host", None)
    return headers


async def test_the_kubelet_api_serves_stats_as_the_api_server_asks(tmp_path: Path, agent: AgentProcess) -> None:
    ca, ctx = write_pki(tmp_path)
    port = free_port()
    agent.extra = {"port": port, "authentication": {"x509": {"clientCAFile": str(ca)}},
                   "authorization": {"mode": "AlwaysAllow"}}
    agent.put("one.yaml", simple_pod("one", [{"name": "c", "command": ["sleep", "3600"]}],
                                     terminationGracePeriodSeconds=1))
    agent.start()
    await agent.wait_phase("one", "Running")
    base = f"https://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/stats/summary", ssl=anonymous_ctx()) as r:
            assert (r.status, await r.text()) == (401, "Unauthorized")

        async def has_pod() -> dict[str, Any] | None:
            async with s.get(f"{base}/stats/summary", ssl=ctx,
                             headers=recorded_request_headers("proxy-stats-summary")) as r:
                assert r.status == 200 and r.headers["Content-Type"] == "application/json"
                body: dict[str, Any] = json.loads(await r.read())
            return body if any(p["podRef"]["name"] == f"one-{agent.node}" and p["containers"]
                               for p in body["pods"]) else None

        body = await agent.wait_for("the pod in the summary", has_pod, timeout=30, interval=1)
        assert body["node"]["nodeName"] == agent.node
        async with s.get(f"{base}/metrics/resource", ssl=ctx, auto_decompress=False,
                         headers=recorded_request_headers("proxy-metrics-resource")) as r:
            assert r.status == 200 and r.headers["Content-Encoding"] == "gzip"
            assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
            fams = _families(gzip.decompress(await r.read()).decode())
        assert {s.labels["pod"] for s in fams["pod_cpu_usage_seconds"].samples} == {f"one-{agent.node}"}
        async with s.get(f"{base}/metrics/cadvisor", ssl=ctx,
                         headers=recorded_request_headers("proxy-metrics-cadvisor")) as r:
            assert r.status == 200
            assert "container_cpu_usage_seconds" in _families(await r.text())
