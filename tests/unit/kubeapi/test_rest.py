from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.kubeapi.rest import ApiError, ConnectError, TokenBucket, TransportError
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, eventually

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


async def test_typed_error_carries_the_status_body(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    try:
        with pytest.raises(ApiError) as e:
            await client.get("/api/v1/nodes/n1")
        assert e.value.not_found and e.value.reason == "NotFound"
        assert e.value.message == 'nodes "n1" not found'
        await client.create("/api/v1/nodes", NODE)
        with pytest.raises(ApiError) as e:
            await client.create("/api/v1/nodes", NODE)
        assert e.value.already_exists and not e.value.conflict
        with pytest.raises(ApiError) as e:
            await client.get("/api/v1/nodes/other")
        assert e.value.forbidden
    finally:
        await client.close()


async def test_429_is_retried_after_retry_after(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.admin_identity(), tmp_path)
    rule = api_server.faults.fail(429, "GET", "/version", times=2, retry_after=0)
    try:
        assert (await client.get("/version"))["gitVersion"] == "v1.36.2"
        assert rule.hits == 2
    finally:
        await client.close()


async def test_500_is_retried_then_given_up(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.admin_identity(), tmp_path)
    once = api_server.faults.fail(500, "GET", "/api/v1/namespaces$", times=1)
    try:
        await client.get("/api/v1/namespaces")
        assert once.hits == 1
        always = api_server.faults.fail(500, "POST", "/api/v1/nodes")
        with pytest.raises(ApiError) as e:
            await client.create("/api/v1/nodes", NODE)
        assert e.value.code == 500 and e.value.reason == "InternalError"
        assert always.hits == client.retry.attempts
    finally:
        await client.close()


async def test_slow_server_times_out(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.admin_identity(), tmp_path, timeout=0.3)
    api_server.faults.delay = 2.0
    try:
        with pytest.raises(TransportError):
            await client.get("/version")
    finally:
        api_server.faults.clear()
        await client.close()


async def test_answers_are_bounded(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.admin_identity(), tmp_path, max_body=64)
    try:
        with pytest.raises(TransportError, match="larger than 64"):
            await client.get("/version")
    finally:
        await client.close()


async def test_token_bucket_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=3, clock=clock)
    for _ in range(3):
        await bucket.acquire()
    waiting = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    clock.advance(0.25)
    await asyncio.sleep(0.01)
    assert not waiting.done()
    clock.advance(0.25)
    await eventually(waiting.done, what="a token after 1/qps")


async def test_a_shortfall_below_the_clocks_resolution_takes_no_second_wait() -> None:
    # sim seed 94: 1 - 1e-13 tokens at t=653 s; the wait for the rest rounded to no time on the clock, and the
    # limiter refilled nothing, slept again and again at one instant (a livelock of the client)
    clock = FakeClock()
    clock.advance(653.04)
    bucket = TokenBucket(qps=50, burst=1, clock=clock)
    bucket._tokens = 1.0 - 1e-13
    waiting = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0.01)
    clock.advance(0.0)
    await eventually(waiting.done, what="the token once the wait has passed")


async def test_a_cancelled_wait_gives_its_token_back() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1, burst=1, clock=clock)
    await bucket.acquire()
    waiting = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0.01)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    clock.advance(1.0)
    await asyncio.wait_for(bucket.acquire(), 1)  # the refilled token, not spent by the cancelled wait
    nxt = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0.01)
    assert not nxt.done()
    clock.advance(1.0)
    await eventually(nxt.done, what="a token after 1/qps")


async def test_requests_pass_the_rate_limiter(api_server: ApiServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = client_for(api_server, api_server.admin_identity(), tmp_path, clock, qps=1, burst=2)
    try:
        await client.get("/version")
        await client.get("/version")
        third = asyncio.create_task(client.get("/version"))
        await asyncio.sleep(0.2)
        assert not third.done()
        clock.advance(1.0)
        assert (await asyncio.wait_for(third, 5))["major"] == "1"
    finally:
        await client.close()


async def test_a_refused_connection_is_not_retried_in_place(api_server: ApiServer, tmp_path: Path) -> None:
    """client-go retries a GET after a reset or EOF, not when nothing answers: the callers' loops (lease backoff
    capped at 7 s, the status period) decide when to try again, so an API server back is seen in that time."""
    clock = FakeClock()
    client = client_for(api_server, api_server.admin_identity(), tmp_path, clock=clock)
    await api_server.stop()
    try:
        with pytest.raises(ConnectError):
            await asyncio.wait_for(client.get("/version"), 5)  # a retry would sleep on the clock nobody advances
        assert clock.monotonic() == 0.0
        await api_server.start()
        assert (await client.get("/version"))["gitVersion"] == "v1.36.2"
    finally:
        await client.close()
