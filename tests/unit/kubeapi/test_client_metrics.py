"""rest_client_* measured in RestClient against the test API server: each attempt, its code, its host."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from minikubelet.base.clock import RealClock
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.kubeapi import client_metrics
from minikubelet.kubeapi.kubeconfig import ClientConfig
from minikubelet.kubeapi.rest import ApiError, ConnectError, RestClient, RetryPolicy
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, eventually

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    r = CollectorRegistry()
    client_metrics.register(r)
    yield r
    client_metrics._recorder = None


def value(r: CollectorRegistry, name: str, **labels: str) -> float:
    return r.get_sample_value(name, labels) or 0.0


async def test_each_attempt_counted_by_code_method_and_host(api_server: ApiServer, tmp_path: Path,
                                                           registry: CollectorRegistry) -> None:
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    host = urlsplit(client.config.server).netloc
    api_server.faults.fail(429, "GET", "/api/v1/nodes/n1$", times=1, retry_after=0)
    try:
        await client.create("/api/v1/nodes", NODE)
        await client.get("/api/v1/nodes/n1")  # 429, then 200
        with pytest.raises(ApiError):
            await client.get("/api/v1/nodes/other")  # 403 for a node identity
    finally:
        await client.close()
    assert value(registry, "rest_client_requests_total", code="201", method="POST", host=host) == 1
    assert value(registry, "rest_client_requests_total", code="200", method="GET", host=host) == 1
    assert value(registry, "rest_client_requests_total", code="429", method="GET", host=host) == 1
    assert value(registry, "rest_client_requests_total", code="403", method="GET", host=host) == 1
    assert value(registry, "rest_client_request_retries_total", code="429", verb="GET", host=host) == 1
    assert value(registry, "rest_client_request_duration_seconds_count", verb="GET", host=host) == 3
    assert value(registry, "rest_client_request_duration_seconds_sum", verb="GET", host=host) > 0
    assert value(registry, "rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host) == 3
    # the POST's body went out; the answers' bodies came back
    assert value(registry, "rest_client_request_size_bytes_sum", verb="POST", host=host) == len(
        b'{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}')
    assert value(registry, "rest_client_request_size_bytes_sum", verb="GET", host=host) == 0
    assert value(registry, "rest_client_response_size_bytes_sum", verb="GET", host=host) > 100


async def test_a_watch_is_counted_as_a_request(api_server: ApiServer, tmp_path: Path,
                                               registry: CollectorRegistry) -> None:
    client = client_for(api_server, api_server.admin_identity(), tmp_path)
    host = urlsplit(client.config.server).netloc
    try:
        async with client.stream_lines("/api/v1/namespaces/default/pods", {"watch": "1"}, idle_timeout=5):
            await eventually(lambda: value(registry, "rest_client_requests_total", code="200", method="GET",
                                           host=host) == 1)
    finally:
        await client.close()


async def test_no_answer_is_the_error_code(registry: CollectorRegistry) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = RestClient(ClientConfig(server=f"http://127.0.0.1:{port}"), RealClock(),
                        retry=RetryPolicy(attempts=1))
    try:
        with pytest.raises(ConnectError):
            await client.get("/version")
    finally:
        await client.close()
    assert value(registry, "rest_client_requests_total", code="<error>", method="GET", host=f"127.0.0.1:{port}") == 1


async def test_nothing_recorded_before_registration(api_server: ApiServer, tmp_path: Path) -> None:
    client_metrics._recorder = None
    client = client_for(api_server, api_server.admin_identity(), tmp_path)
    try:
        assert (await client.get("/version"))["gitVersion"]
    finally:
        await client.close()
    assert client_metrics.recorder() is None
