"""The event stream reconnects after a break and resumes from the last event seen."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from cri.docker import DockerRuntime
from cri.docker.client import DockerClient
from cri.docker.events import container_events
from cri.errors import RuntimeUnavailableError
from cri.types import ContainerEventType


def message(action: str, container_id: str, time_nano: int) -> bytes:
    return (
        json.dumps(
            {
                "Type": "container",
                "Action": action,
                "Actor": {"ID": container_id, "Attributes": {"io.kubernetes.docker.type": "container"}},
                "timeNano": time_nano,
            }
        ).encode()
        + b"\n"
    )


class FakeContent:
    def __init__(self, lines: list[bytes], then_fail: bool) -> None:
        self._lines = lines
        self._then_fail = then_fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for line in self._lines:
            yield line
        if self._then_fail:
            raise ConnectionResetError("stream broke")


class FakeResponse:
    def __init__(self, content: FakeContent) -> None:
        self.content = content


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[Mapping[str, Any]] = []

    @asynccontextmanager
    async def stream(self, path: str, params: Mapping[str, Any]) -> AsyncIterator[FakeResponse]:
        self.calls.append(dict(params))
        if len(self.calls) == 1:
            yield FakeResponse(FakeContent([message("start", "a", 5_000_000_001), b"\n"], then_fail=True))
        elif len(self.calls) == 2:
            raise RuntimeUnavailableError("daemon restarting")
        else:
            yield FakeResponse(FakeContent([message("die", "a", 6_000_000_000)], then_fail=False))


async def test_reconnects_with_since_after_failures() -> None:
    client = FakeClient()
    events = container_events(cast(DockerClient, client), initial_backoff=0.001, max_backoff=0.002)
    first = await anext(events)
    second = await anext(events)
    await events.aclose()
    assert [(e.container_id, e.type) for e in (first, second)] == [
        ("a", ContainerEventType.STARTED),
        ("a", ContainerEventType.STOPPED),
    ]
    assert "since" not in client.calls[0]
    assert client.calls[1]["since"] == client.calls[2]["since"] == "5.000000001"
    filters = json.loads(str(client.calls[0]["filters"]))
    assert filters == {
        "type": ["container"],
        "event": ["create", "destroy", "die", "start"],
        "label": ["io.kubernetes.docker.type"],
    }


async def test_unreachable_daemon_is_runtime_unavailable() -> None:
    runtime = DockerRuntime("unix:///nonexistent/docker.sock")
    try:
        with pytest.raises(RuntimeUnavailableError):
            await runtime.connect()
    finally:
        await runtime.close()
