"""A CRI RuntimeService on a unix socket (grpclib's server) that answers only what a test gives it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Cardinality, Handler
from grpclib.server import Server, Stream

Answer = Callable[[Stream[Any, Any]], Awaitable[None]]


class PartialRuntime:
    """A CRI RuntimeService answering only the methods a test gives it (the rest: UNIMPLEMENTED)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[Cardinality, type[Any], type[Any], Answer]] = {}

    def answer(self, method: str, request: type[Any], reply: type[Any], fn: Answer,
               cardinality: Cardinality = Cardinality.UNARY_UNARY) -> None:
        self.answers[method] = (cardinality, request, reply, fn)

    def __mapping__(self) -> dict[str, Handler]:
        return {f"/runtime.v1.RuntimeService/{name}": Handler(fn, cardinality, request, reply)
                for name, (cardinality, request, reply, fn) in self.answers.items()}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[PartialRuntime, Callable[[], Awaitable[str]]]]:
    runtime = PartialRuntime()
    servers: list[Server] = []

    async def start() -> str:
        server = Server([runtime])
        path = str(tmp_path / "cri.sock")
        await server.start(path=path)
        servers.append(server)
        return f"unix://{path}"

    yield runtime, start
    for server in servers:
        server.close()
        await server.wait_closed()
