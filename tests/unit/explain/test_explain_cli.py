"""`minikubelet explain`: which port it asks (the agent's config file), what it prints, and its exit codes."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest

from cri.fake import Program
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.cli import main
from minikubelet.server.app import KubeletServer
from tests.unit.explain.explained import SCHEMA, ExplainedNode, explained_node
from tests.unit.fake_node import make_pod


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _no_checks() -> list[tuple[str, str | None]]:
    return []


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[ExplainedNode, int]]:
    async for en in explained_node(tmp_path / "node"):
        node = en.node
        server = KubeletServer(node.statuses.pod_list, _no_checks, CollectorRegistry(), node.recorder.list)
        server.explain = en.explainer.explain
        port = free_port()
        await server.serve("127.0.0.1", port, server.routes())
        try:
            yield en, port
        finally:
            await server.close()


async def test_the_command_asks_the_read_only_port_of_the_agents_config(
        served: tuple[ExplainedNode, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    en, port = served
    en.node.runtime.program("app", Program(exit_on_start=4))
    en.node.config.set_source_pods("file", [make_pod()])
    await en.node.advance(11)
    config = tmp_path / "config.yaml"
    config.write_text(f"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                      f"address: 0.0.0.0\nreadOnlyPort: {port}\n")
    assert await asyncio.to_thread(main, ["explain", "default/p", "--config", str(config)]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["decision"]["containers"][0]["reason"] == "CrashLoopBackOff"

    assert await asyncio.to_thread(main, ["explain", "p", "--config", str(config), "-o", "wide"]) == 0
    wide = capsys.readouterr().out
    assert "Pod:        default/p (uid-1)" in wide and "CrashLoopBackOff" in wide and "exit codes [4" in wide

    assert await asyncio.to_thread(main, ["explain", "default/nobody", "--server", f"http://127.0.0.1:{port}"]) == 1
    assert "pod default/nobody is not known on this node" in capsys.readouterr().err


async def test_an_agent_without_a_read_only_port_is_told_to_ask_the_api_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    joined = tmp_path / "joined.yaml"
    joined.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreadOnlyPort: 0\n")
    assert await asyncio.to_thread(main, ["explain", "kube-system/dns", "--config", str(joined)]) == 2
    err = capsys.readouterr().err
    assert "read-only port is off" in err
    assert "kubectl get --raw /api/v1/nodes/NODE/proxy/debug/pods/kube-system/dns/explain" in err
    closed = free_port()
    assert await asyncio.to_thread(main, ["explain", "x", "--server", f"http://127.0.0.1:{closed}"]) == 1
    assert "cannot reach the agent" in capsys.readouterr().err
