"""The parser process: the same answers as in-process parsing, and a stuck or dead worker costs one file."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
import yaml

from minikubelet.sources.manifest_worker import InProcessParser, ProcessParser
from minikubelet.sources.static_pod import ManifestError

GOOD = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}).encode()
BAD_PORT = GOOD.replace(b"name: c", b"name: c\n    ports: [{containerPort: 70000}]")
LAUGHS = b"apiVersion: v1\nkind: Pod\nx:\n  a0: &a0 [lol]\n" + b"".join(
    f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n".encode() for i in range(1, 9))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def test_worker_answers_like_in_process_parsing() -> None:
    parser = ProcessParser()
    try:
        pod = await parser.parse(GOOD, "/m/web.yaml", "n1", 1_700_000_000.0)
        assert pod == await InProcessParser().parse(GOOD, "/m/web.yaml", "n1", 1_700_000_000.0)
        assert pod["metadata"]["name"] == "web-n1"
        with pytest.raises(ManifestError) as info:
            await parser.parse(BAD_PORT, "/m/bad.yaml", "n1", None)
        assert info.value.reason == "invalid" and str(info.value).startswith("/m/bad.yaml: invalid pod:")
        assert [e.path for e in info.value.errors] == ["spec.containers[0].ports[0].containerPort"]
        with pytest.raises(ManifestError, match="excessive aliasing") as info:
            await parser.parse(LAUGHS, "/m/laughs.yaml", "n1", None)
        assert info.value.reason == "too_complex"
        assert parser.started == 1  # one worker served all three
    finally:
        await parser.close()


async def test_a_stuck_worker_is_killed_and_replaced() -> None:
    parser = ProcessParser(timeout=0.001)
    try:
        with pytest.raises(ManifestError, match="took longer than") as info:
            await parser.parse(GOOD, "/m/slow.yaml", "n1", None)
        assert info.value.reason == "too_complex"
        parser._timeout = 30
        assert (await parser.parse(GOOD, "/m/web.yaml", "n1", None))["metadata"]["name"] == "web-n1"
        assert parser.started == 2
    finally:
        await parser.close()


async def test_a_dead_worker_costs_one_file_and_close_stops_it() -> None:
    parser = ProcessParser()
    await parser.parse(GOOD, "/m/web.yaml", "n1", None)
    pid = parser.pid
    assert pid is not None and _alive(pid)
    os.kill(pid, 9)
    with pytest.raises(ManifestError, match="parser process died"):
        await parser.parse(GOOD, "/m/web.yaml", "n1", None)
    await parser.parse(GOOD, "/m/web.yaml", "n1", None)
    pid = parser.pid
    assert pid is not None
    await parser.close()
    assert not _alive(pid) and parser.pid is None


async def test_prestart_starts_the_worker_the_first_manifest_then_uses() -> None:
    parser = ProcessParser(idle=30)
    try:
        await parser.prestart()
        pid = parser.pid
        assert pid is not None and _alive(pid) and parser.started == 1
        await parser.prestart()  # one worker, however often asked
        assert (await parser.parse(GOOD, "/m/web.yaml", "n1", None))["metadata"]["name"] == "web-n1"
        assert parser.pid == pid and parser.started == 1
    finally:
        await parser.close()


async def test_a_prestarted_worker_that_gets_no_manifest_stops_after_the_idle_period() -> None:
    parser = ProcessParser(idle=0.2)
    await parser.prestart()
    pid = parser.pid
    assert pid is not None
    for _ in range(100):
        if parser.pid is None and not _alive(pid):
            break
        await asyncio.sleep(0.05)
    assert parser.pid is None and not _alive(pid)
    await parser.parse(GOOD, "/m/web.yaml", "n1", None)  # a later manifest starts another
    assert parser.started == 2
    await parser.close()


def test_the_worker_process_imports_no_asyncio() -> None:
    # Its start-up is on the first pod's path: asyncio and ssl alone were ~40 % of it.
    code = ("import sys, minikubelet.sources.parser_process as p; "
            "print(sorted(m for m in ('asyncio', 'ssl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
