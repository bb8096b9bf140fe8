"""exec probes through a runtime, and the dispatcher that picks a handler from a probe spec."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from aiohttp import web

from cri.errors import NotFoundError
from cri.runtime import RuntimeService
from cri.types import ExecResult
from minikubelet.base.podview import ContainerView, ProbeSpec
from probes.exec import probe_exec
from probes.prober import run_probe
from probes.result import MAX_OUTPUT_BYTES, ProbeOutcome, Result


class ExecRuntime:
    def __init__(self, reply: ExecResult | Exception | None = None, delay: float = 0.0) -> None:
        self.reply = reply
        self.delay = delay
        self.calls: list[tuple[str, list[str], float]] = []

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        self.calls.append((container_id, cmd, timeout))
        await asyncio.sleep(self.delay)
        if isinstance(self.reply, Exception):
            raise self.reply
        assert self.reply is not None
        return self.reply


def runtime(fake: ExecRuntime) -> RuntimeService:
    return cast(RuntimeService, fake)


async def test_exit_zero_is_success_and_argv_passes_unchanged() -> None:
    fake = ExecRuntime(ExecResult(0, b"ok\n", b""))
    outcome = await probe_exec(runtime(fake), "cid", ["cat", "/tmp/healthy file"], 2)
    assert outcome.result is Result.SUCCESS
    assert outcome.output == "ok\n"
    assert fake.calls == [("cid", ["cat", "/tmp/healthy file"], 2)]


async def test_nonzero_exit_is_failure_with_combined_output_capped() -> None:
    fake = ExecRuntime(ExecResult(1, b"out-" * 2000, b"err-" * 2000))
    outcome = await probe_exec(runtime(fake), "cid", ["false"], 1)
    assert outcome.result is Result.FAILURE
    assert len(outcome.output) == MAX_OUTPUT_BYTES
    assert outcome.output.startswith("out-")


async def test_runtime_timeout_is_failure_with_upstream_message() -> None:
    fake = ExecRuntime(ExecResult(-1, timed_out=True))
    outcome = await probe_exec(runtime(fake), "cid", ["sleep", "10"], 1)
    assert outcome.result is Result.FAILURE
    assert outcome.output == 'command "sleep 10" timed out'


async def test_runtime_error_is_unknown() -> None:
    fake = ExecRuntime(NotFoundError("no such container: cid"))
    outcome = await probe_exec(runtime(fake), "cid", ["true"], 1)
    assert outcome.result is Result.UNKNOWN
    assert outcome.output == "no such container: cid"


def _container(**extra: Any) -> dict[str, Any]:
    return {"name": "app", "ports": [{"name": "http", "containerPort": 0}], **extra}


async def dispatch(
    rt: RuntimeService, spec: dict[str, Any], container: dict[str, Any], pod_ip: str
) -> ProbeOutcome:
    """run_probe over the views of a probe spec and its container, as the manager calls it."""
    return await run_probe(rt, ProbeSpec.of(spec), ContainerView.of(container), pod_ip, "cid")


async def test_dispatch_exec_uses_timeout_seconds() -> None:
    fake = ExecRuntime(ExecResult(0))
    spec = {"exec": {"command": ["true"]}, "timeoutSeconds": 7}
    outcome = await dispatch(runtime(fake), spec, _container(), "10.0.0.1")
    assert outcome.result is Result.SUCCESS
    assert fake.calls == [("cid", ["true"], 7.0)]


@pytest.fixture
async def http_port() -> Any:
    seen: list[str] = []

    async def ok(request: web.Request) -> web.Response:
        seen.append(request.host)
        return web.Response(text="fine")

    app = web.Application()
    app.router.add_get("/healthz", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield runner.addresses[0][1], seen
    await runner.cleanup()


async def test_dispatch_http_named_port_and_pod_ip(http_port: tuple[int, list[str]]) -> None:
    port, seen = http_port
    container = {"name": "app", "ports": [{"name": "web", "containerPort": port}]}
    spec = {"httpGet": {"path": "/healthz", "port": "web", "scheme": "HTTP"}, "timeoutSeconds": 1}
    outcome = await dispatch(runtime(ExecRuntime()), spec, container, "127.0.0.1")
    assert outcome.result is Result.SUCCESS
    assert seen == [f"127.0.0.1:{port}"]


async def test_dispatch_tcp_numeric_string_port(http_port: tuple[int, list[str]]) -> None:
    port, _ = http_port
    spec = {"tcpSocket": {"port": str(port)}, "timeoutSeconds": 1}
    outcome = await dispatch(runtime(ExecRuntime()), spec, _container(), "127.0.0.1")
    assert outcome.result is Result.SUCCESS


@pytest.mark.parametrize("port", ["metrics", 0, 70000])
async def test_dispatch_bad_port_is_unknown(port: object) -> None:
    spec = {"tcpSocket": {"port": port}, "timeoutSeconds": 1}
    outcome = await dispatch(runtime(ExecRuntime()), spec, _container(), "127.0.0.1")
    assert outcome.result is Result.UNKNOWN


async def test_dispatch_without_action_is_unknown() -> None:
    outcome = await dispatch(runtime(ExecRuntime()), {"timeoutSeconds": 1}, _container(), "127.0.0.1")
    assert outcome.result is Result.UNKNOWN
